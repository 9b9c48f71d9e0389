"""Rewards that depend on the whole episode, and discounting to spread them over its steps.

A `TrajectoryRubric` records each `(action, observation)` and returns `intermediate` (0 by
default) until an observation has `done=True`; then it scores the whole trajectory with
`score_trajectory` (sync or async). `step_rewards()` assigns that final score back to every step
with discount `gamma`: step t of T gets `gamma ** (T - 1 - t) * final`, so with gamma = 1 all
steps share the outcome and with gamma = 0 only the last one does.

`discounted_returns(rewards, gamma)` is the per-step counterpart: the return-to-go of each step.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from openenv.errors import RubricError
from openenv.rubrics.base import Rubric

__all__ = ["TrajectoryRubric", "discounted_returns"]


def _is_done(observation: Any) -> bool:
    if isinstance(observation, dict):
        return bool(observation.get("done", False))
    return bool(getattr(observation, "done", False))


def _check_gamma(gamma: float) -> float:
    if not 0.0 <= gamma <= 1.0:
        raise RubricError(f"gamma must be within [0, 1], got {gamma!r}")
    return float(gamma)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """The return-to-go of each step: `G[t] = rewards[t] + gamma * G[t + 1]`.

    Raises:
        RubricError: gamma is outside [0, 1].
    """
    gamma = _check_gamma(gamma)
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


class TrajectoryRubric(Rubric):
    """Base class of episode-level rubrics: implement `score_trajectory(trajectory)`.

        class Won(TrajectoryRubric):
            def score_trajectory(self, trajectory):
                _, last = trajectory[-1]
                return 1.0 if last.metadata.get("winner") == "agent" else 0.0

    Each environment instance needs its own rubric object (the trajectory is per episode);
    `Environment.reset_rubric()` clears it. Trajectories are kept in memory until reset.

    Args:
        gamma: discount used by `step_rewards()`, within [0, 1].
        intermediate: the score of every step before the last.
    """

    def __init__(self, gamma: float = 1.0, intermediate: float = 0.0) -> None:
        self.gamma = _check_gamma(gamma)
        self.intermediate = float(intermediate)
        self._trajectory: list[tuple[Any, Any]] = []
        self.final_score: float | None = None

    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> Any:
        """Score a finished episode from its `(action, observation)` pairs (may be `async def`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement score_trajectory(trajectory)")

    def _own_async(self) -> bool:
        return inspect.iscoroutinefunction(self.score_trajectory)

    def _score(self, action: Any, observation: Any) -> Any:
        if not self._step(action, observation):
            return self.intermediate
        return self._finish(self.score_trajectory(list(self._trajectory)))

    async def _ascore(self, action: Any, observation: Any) -> Any:
        if not self._step(action, observation):
            return self.intermediate
        out = self.score_trajectory(list(self._trajectory))
        return self._finish(await out if inspect.isawaitable(out) else out)

    def _step(self, action: Any, observation: Any) -> bool:
        if self.final_score is not None:
            raise RubricError(
                f"{self.label}: the episode already ended; call reset() (Environment.reset_rubric()) before the next one"
            )
        self._trajectory.append((action, observation))
        return _is_done(observation)

    def _finish(self, value: Any) -> Any:
        self.final_score = self._record(value)
        return self.final_score

    @property
    def trajectory(self) -> list[tuple[Any, Any]]:
        """The `(action, observation)` pairs of the current episode (a copy)."""
        return list(self._trajectory)

    @property
    def finished(self) -> bool:
        """Whether the episode has ended and been scored."""
        return self.final_score is not None

    def step_rewards(self) -> list[float]:
        """The final score spread over the episode's steps with discount `gamma`.

        Raises:
            RubricError: the episode has not ended yet.
        """
        if self.final_score is None:
            raise RubricError(f"{self.label}: step_rewards() needs a finished episode (an observation with done=True)")
        last = len(self._trajectory) - 1
        return [self.final_score * self.gamma ** (last - t) for t in range(len(self._trajectory))]

    def reset(self) -> None:
        self._trajectory = []
        self.final_score = None
        super().reset()
