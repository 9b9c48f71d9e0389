"""Tiny environments for the rollout engine's tests, each with one behaviour to observe.

- `ScoredEnv`: a counting game that reports rubric-style reward components in its metadata.
- `SlowEnv`: a step sleeps as long as the action asks (for the step-timeout tests).
- `PickyEnv`: rejects the action "bad" with a validation error and raises on "boom".

`python -m openenv.server tests.training.envs:slow_app` serves one in a subprocess.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field

from openenv import Action, Environment, Observation, State, create_app


class CountAction(Action):
    move: str = Field(description="anything; 'good' scores")
    delay_s: float = 0.0


class CountObservation(Observation):
    text: str = ""
    count: int = 0


class ScoredEnv(Environment[CountAction, CountObservation, State]):
    """Ends after `length` steps (reset option, default 3). A 'good' move scores 1 (correctness)
    plus 0.5 (format); anything else scores 0 and 0.5. Forkable: its state is three numbers."""

    SNAPSHOT_ATTRS = ("_n", "_length", "_seed")

    def __init__(self) -> None:
        self._n = 0
        self._length = 3
        self._seed: int | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, length: int = 3, **kwargs: Any
    ) -> CountObservation:
        self._n, self._length, self._seed = 0, length, seed
        return CountObservation(text=f"seed {seed}: say good", count=0)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        self._n += 1
        correct = 1.0 if action.move == "good" else 0.0
        components = {"correct": correct, "format": 0.5}
        return CountObservation(
            text=f"seed {self._seed}: step {self._n}",
            count=self._n,
            reward=correct + 0.5,
            done=self._n >= self._length,
            metadata={"reward_components": components},
        )

    @property
    def state(self) -> State:
        return State(step_count=self._n)


class SlowEnv(ScoredEnv):
    """A ScoredEnv whose steps sleep `action.delay_s` (a blocking env: runs in the server's pool)."""

    EXECUTION = "thread"

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        time.sleep(action.delay_s)
        return super().step(action)


class PickyAction(Action):
    move: Literal["ok", "boom"]


class PickyEnv(Environment[PickyAction, CountObservation, State]):
    """Two steps per episode; 'boom' raises inside the env; anything but ok/boom fails validation."""

    def __init__(self) -> None:
        self._n = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self._n = 0
        return CountObservation(text="say ok")

    def step(self, action: PickyAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        if action.move == "boom":
            raise RuntimeError("boom")
        self._n += 1
        return CountObservation(text="ok", count=self._n, reward=1.0, done=self._n >= 2)

    @property
    def state(self) -> State:
        return State(step_count=self._n)


scored_app = create_app(ScoredEnv, CountAction, CountObservation, env_name="scored")
slow_app = create_app(SlowEnv, CountAction, CountObservation, env_name="slow")
picky_app = create_app(PickyEnv, PickyAction, CountObservation, env_name="picky")
