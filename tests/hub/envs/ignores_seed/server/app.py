"""Starts each episode at a random position, whatever the seed says."""

from __future__ import annotations

import random
from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import MoveAction, PositionObservation
except ImportError:
    from models import MoveAction, PositionObservation  # type: ignore[no-redef]


class Env(Environment[MoveAction, PositionObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="walk")
        self._position = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> PositionObservation:
        self._position = random.randrange(10, 1000)  # the bug: `seed` is accepted and never used
        self._state = State(episode_id=episode_id or "walk")
        return PositionObservation(position=self._position, reward=0.0)

    def step(self, action: MoveAction, timeout_s: float | None = None, **kw: Any) -> PositionObservation:
        self._position += action.move
        self._state.step_count += 1
        done = self._position == 0 or self._state.step_count >= 100
        return PositionObservation(position=self._position, reward=-abs(self._position) / 1000, done=done)

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, MoveAction, PositionObservation)
