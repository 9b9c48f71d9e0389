"""Every session's environment is kept forever (a module-level list), with 2 MB of its own."""

from __future__ import annotations

from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import EchoAction, EchoObservation
except ImportError:
    from models import EchoAction, EchoObservation  # type: ignore[no-redef]

LIMIT = 24
_LEAKED: list[Any] = []


class Env(Environment[EchoAction, EchoObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        if len(_LEAKED) >= LIMIT:
            raise RuntimeError(f"no free session handle: {len(_LEAKED)} sessions were never released")
        self._ballast = b"\x01" * (2 << 20)  # written, so it is resident
        _LEAKED.append(self)  # the bug: nothing ever removes it (close() is not overridden)
        self._state = State(episode_id="leak")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or "leak")
        return EchoObservation(echoed_message="ready", reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kw: Any) -> EchoObservation:
        self._state.step_count += 1
        return EchoObservation(
            echoed_message=action.message, message_length=len(action.message), reward=0.1 * len(action.message)
        )

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, EchoAction, EchoObservation)
