"""The game: guess a secret number from 1 to 100; each step says higher or lower."""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv import Environment

try:
    from ..models import __ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State
except ImportError:  # run from the env's folder
    from models import __ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State  # type: ignore[no-redef]

LOW, HIGH = 1, 100
MAX_GUESSES = 7  # a binary search over 1..100 always needs at most 7


class __ENV_CLASS__Environment(Environment[__ENV_CLASS__Action, __ENV_CLASS__Observation, __ENV_CLASS__State]):
    """Guess a secret number from 1 to 100 in at most 7 tries."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own instance and nothing is shared

    def __init__(self) -> None:
        self._secret = LOW
        self._episode_id = str(uuid.uuid4())
        self._steps = 0
        self._left = MAX_GUESSES
        self._solved = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> __ENV_CLASS__Observation:
        # The env's name is in the seed: each env made from this template has secrets of its own, so
        # the SDK's copy of the template (installed in the env's image) holds none of its answers.
        self._secret = (random.Random(f"__ENV_NAME__:{seed}") if seed is not None else random.Random()).randint(LOW, HIGH)
        self._episode_id = episode_id or str(uuid.uuid4())
        self._steps = 0
        self._left = MAX_GUESSES
        self._solved = False
        return __ENV_CLASS__Observation(feedback="start", guesses_left=self._left, reward=0.0)

    def step(self, action: __ENV_CLASS__Action, timeout_s: float | None = None, **kwargs: Any) -> __ENV_CLASS__Observation:
        if self._solved or self._left == 0:  # the episode is over: say so again, change nothing
            feedback = "correct" if self._solved else "out of guesses"
            return __ENV_CLASS__Observation(feedback=feedback, guesses_left=self._left, reward=0.0, done=True)
        self._steps += 1
        self._left -= 1
        if action.guess == self._secret:
            self._solved = True
            return __ENV_CLASS__Observation(feedback="correct", guesses_left=self._left, reward=1.0, done=True)
        if self._left == 0:
            return __ENV_CLASS__Observation(feedback="out of guesses", guesses_left=0, reward=0.0, done=True)
        feedback = "higher" if self._secret > action.guess else "lower"
        return __ENV_CLASS__Observation(feedback=feedback, guesses_left=self._left, reward=0.0)

    @property
    def state(self) -> __ENV_CLASS__State:
        return __ENV_CLASS__State(episode_id=self._episode_id, step_count=self._steps, guesses_left=self._left, solved=self._solved)
