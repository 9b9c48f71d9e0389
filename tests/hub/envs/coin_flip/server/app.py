"""A coin flipped from the system's randomness: no seed can fix it, and the env declares it."""

from __future__ import annotations

import random
from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import CoinObservation, GuessAction
except ImportError:
    from models import CoinObservation, GuessAction  # type: ignore[no-redef]

_COIN = random.SystemRandom()


class Env(Environment[GuessAction, CoinObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="coin")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> CoinObservation:
        self._state = State(episode_id=episode_id or "coin")
        return CoinObservation(luck=_COIN.random(), reward=0.0)

    def step(self, action: GuessAction, timeout_s: float | None = None, **kw: Any) -> CoinObservation:
        self._state.step_count += 1
        heads = _COIN.random() < 0.5
        return CoinObservation(
            flip="heads" if heads else "tails",
            luck=_COIN.random(),
            reward=1.0 if heads == action.heads else 0.0,
            done=self._state.step_count >= 20,
        )

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, GuessAction, CoinObservation)
