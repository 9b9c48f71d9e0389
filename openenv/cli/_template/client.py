"""The typed client: `with __ENV_CLASS__Env(url).sync() as env: env.step(__ENV_CLASS__Action(guess=50))`."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import __ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State
except ImportError:  # used from the env's folder, not as a package
    from models import __ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State  # type: ignore[no-redef]


class __ENV_CLASS__Env(EnvClient[__ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State]):
    """A session of the __ENV_NAME__ server; replies are parsed into the classes above."""
