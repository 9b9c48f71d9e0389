"""Putting a rubric's verdict into an observation: the reward and its named components.

`metadata["reward_components"]` maps each evaluated part's dotted name to its score, and on the
step that ends an episode `metadata["trajectory_rewards"]` maps each trajectory rubric to its
per-step discounted credit. Our servers deliver observation metadata to clients, so a trainer
can log both.
"""

from __future__ import annotations

from typing import Any, TypeVar

from openenv.rubrics.base import Rubric
from openenv.rubrics.trajectory import TrajectoryRubric

__all__ = ["REWARD_COMPONENTS", "TRAJECTORY_REWARDS", "attach_reward"]

REWARD_COMPONENTS = "reward_components"
TRAJECTORY_REWARDS = "trajectory_rewards"

ObsT = TypeVar("ObsT")


def attach_reward(rubric: Rubric, observation: ObsT, score: float) -> ObsT:
    """Set `observation.reward = score` and add the rubric's components to its metadata.

    Returns the same observation (changed in place).
    """
    observation.reward = score  # type: ignore[attr-defined]
    metadata: dict[str, Any] = observation.metadata  # type: ignore[attr-defined]
    metadata[REWARD_COMPONENTS] = rubric.components()
    finished = _finished_trajectories(rubric)
    if finished:
        metadata[TRAJECTORY_REWARDS] = finished
    return observation


def _finished_trajectories(rubric: Rubric) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    if isinstance(rubric, TrajectoryRubric) and rubric.finished and rubric.last_score is not None:
        found[rubric.default_name()] = rubric.step_rewards()
    for path, child in rubric.named_rubrics():
        # last_score is set only by this evaluation: a trajectory finished on an earlier step
        # (and since skipped by a gate) is not reported again.
        if isinstance(child, TrajectoryRubric) and child.finished and child.last_score is not None:
            found[path] = child.step_rewards()
    return found
