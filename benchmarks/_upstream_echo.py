"""An echo env written against upstream openenv-core 0.3.0, served the way its Spaces are.

Run only with the upstream virtual environment's Python (upstream's package is also named
`openenv`, so it never shares an interpreter with ours).
"""

import uuid

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str
    message_length: int = 0


class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", message_length=0, reward=0.0)

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        n = len(action.message)
        return EchoObservation(echoed_message=action.message, message_length=n, reward=0.1 * n)

    @property
    def state(self):
        return self._state


app = create_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=256)


class EchoClient(EnvClient):
    """Upstream's client for this env, written as an upstream user writes one (the drivers use it)."""

    def _step_payload(self, action):
        return action.model_dump()

    def _parse_result(self, payload):
        done = payload.get("done", False)
        obs = EchoObservation(**payload["observation"], reward=payload.get("reward"), done=done)
        return StepResult(observation=obs, reward=payload.get("reward"), done=done)

    def _parse_state(self, payload):
        return payload
