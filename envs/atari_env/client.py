"""The typed client of the Atari environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import AtariAction, AtariObservation, AtariState
except ImportError:  # run from the env's folder, not as a package
    from models import AtariAction, AtariObservation, AtariState  # type: ignore[no-redef]


class AtariEnv(EnvClient[AtariAction, AtariObservation, AtariState]):
    """`async with AtariEnv(url) as env: await env.reset(game="breakout"); await env.step(AtariAction(action=1))`"""
