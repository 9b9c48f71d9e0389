"""An env written against upstream openenv-core 0.3.0 (run only with the upstream venv's Python).

`python -m uvicorn count_server:app` from this folder serves it the way upstream Spaces do.
"""

import uuid

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class CountAction(Action):
    message: str = ""
    fail: bool = False


class CountObservation(Observation):
    echoed: str
    count: int


class CountEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or f"ep-{seed}", step_count=0)
        return CountObservation(echoed="ready", count=0, reward=0.0)

    def step(self, action, timeout_s=None, **kwargs):
        if action.fail:
            raise ValueError(f"asked to fail on {action.message!r}")
        self._state.step_count += 1
        return CountObservation(
            echoed=action.message, count=self._state.step_count, reward=float(self._state.step_count)
        )

    @property
    def state(self):
        return self._state


app = create_app(CountEnvironment, CountAction, CountObservation, max_concurrent_envs=32)
