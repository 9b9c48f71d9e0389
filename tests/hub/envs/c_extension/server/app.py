from __future__ import annotations

from typing import Any

import fastsum  # the env's own C extension, built in the image

from openenv import Environment, State, create_app

try:
    from ..models import EchoAction, EchoObservation
except ImportError:
    from models import EchoAction, EchoObservation  # type: ignore[no-redef]


class Env(Environment[EchoAction, EchoObservation, State]):
    """Echoes the message; its length field is the sum of its code points, computed in C."""

    def __init__(self) -> None:
        self._state = State(episode_id="x")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, timeout_s: float | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message=action.message, message_length=fastsum.total(action.message))

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, EchoAction, EchoObservation)
