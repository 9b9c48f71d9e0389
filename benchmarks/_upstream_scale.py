"""The echo env of `_upstream_echo`, served by upstream openenv-core 0.3.0 with room for many sessions.

Its capacity (`max_concurrent_envs`) is $SCALE_MAX_SESSIONS (default 20,000). Run only with the
upstream virtual environment's Python.
"""

import os

from _upstream_echo import EchoAction, EchoEnvironment, EchoObservation
from openenv.core.env_server import create_app

app = create_app(
    EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=int(os.environ.get("SCALE_MAX_SESSIONS", "20000"))
)
