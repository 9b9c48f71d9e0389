"""Rubrics: composable reward functions of `(action, observation)`.

Per-step rubrics (`Rubric`, `FnRubric`), episode-level ones (`TrajectoryRubric`, with discounted
credit per step), and containers (`WeightedSum`, `Gate`, `Sequential`). Any of them may be async;
`await rubric.evaluate(...)` runs independent async parts concurrently. An environment sets
`self.rubric` and calls `self.apply_rubric(action, obs)` in `step` (and `self.reset_rubric()` in
`reset`); the observation then carries the reward and `metadata["reward_components"]`.
See docs/rubrics.md.
"""

from __future__ import annotations

from openenv.errors import RubricError
from openenv.rubrics.base import FnRubric, Rubric, as_rubric
from openenv.rubrics.containers import Gate, Sequential, WeightedSum
from openenv.rubrics.reporting import REWARD_COMPONENTS, TRAJECTORY_REWARDS, attach_reward
from openenv.rubrics.trajectory import TrajectoryRubric, discounted_returns

__all__ = [
    "REWARD_COMPONENTS",
    "TRAJECTORY_REWARDS",
    "FnRubric",
    "Gate",
    "Rubric",
    "RubricError",
    "Sequential",
    "TrajectoryRubric",
    "WeightedSum",
    "as_rubric",
    "attach_reward",
    "discounted_returns",
]
