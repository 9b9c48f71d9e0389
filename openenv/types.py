"""The data models every environment speaks: actions in, observations and state out.

They are wire-compatible with upstream OpenEnv: an `Action` rejects unknown fields, an
`Observation` carries `done`, `reward` and `metadata`, a `State` carries `episode_id` and
`step_count` and accepts extra fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Action", "EnvironmentMetadata", "Observation", "Snapshot", "State", "StepResult"]


class Action(BaseModel):
    """Base class of an environment's action. Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data that travels with the action.")


class Observation(BaseModel):
    """Base class of what an environment returns from `reset` and `step`."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    done: bool = Field(default=False, description="Whether the episode has ended.")
    reward: bool | int | float | None = Field(default=None, description="Reward for the last action.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data, e.g. reward components.")


class State(BaseModel):
    """Base class of an environment's internal state. Extra fields are allowed."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    episode_id: str | None = Field(default=None, description="Identifier of the current episode.")
    step_count: int = Field(default=0, ge=0, description="Steps taken in the current episode.")


class EnvironmentMetadata(BaseModel):
    """What `GET /metadata` describes: shown by catalogs and web UIs."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


ObsT = TypeVar("ObsT")


@dataclass(slots=True)
class StepResult(Generic[ObsT]):
    """One reply of `reset` or `step`.

    Attributes:
        observation: the observation, parsed into the client's observation class (or a dict).
        reward: the reward the server reported beside the observation (None at reset, usually).
        done: whether the episode has ended.
        metadata: the observation's metadata (reward components, info), when it has any.
    """

    observation: ObsT
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A handle on a state the server keeps (the "fork" extension); made by `EnvClient.snapshot()`.

    The state itself never leaves the server: this is its id and a few facts about it.

    Attributes:
        id: the server's id of the snapshot (valid on the session that took it).
        step_count: the env's step count when it was taken.
        nbytes: the server's estimate of its size.
        expires_in_s: how long it lives unused (each restore or fork from it starts the clock again).
    """

    id: str
    step_count: int | None = None
    nbytes: int = 0
    expires_in_s: float | None = None
