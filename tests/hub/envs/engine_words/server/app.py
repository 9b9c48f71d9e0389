from __future__ import annotations

from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import EchoAction, EchoObservation
except ImportError:
    from models import EchoAction, EchoObservation  # type: ignore[no-redef]


class Env(Environment[EchoAction, EchoObservation, State]):
    def __init__(self) -> None:
        self._state = State(episode_id="x")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, timeout_s: float | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message=action.message, message_length=len(action.message))

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, EchoAction, EchoObservation)
