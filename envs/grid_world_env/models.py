"""The grid world's models: a move in; the grid as text, positions and the moves that go somewhere, out."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from openenv import Action, Observation, State

Move = Literal["up", "down", "left", "right"]


class GridAction(Action):
    """Move one cell. Case and spaces are ignored."""

    move: Move = Field(description='"up", "down", "left" or "right".')

    @field_validator("move", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class GridObservation(Observation):
    """The grid after the move. Reward: -0.01 a step, +1 at the goal, -1 in a pit."""

    grid: str = Field(default="", description="Rows of the grid: # wall, . floor, A you, G goal, X pit.")
    position: list[int] = Field(default_factory=list, description="Your [row, column] (0-based, row 0 at the top).")
    goal: list[int] = Field(default_factory=list, description="The goal's [row, column].")
    legal_moves: list[Move] = Field(
        default_factory=list, description="Moves that do not walk into a wall or off the grid."
    )
    steps_left: int = Field(default=0, description="Steps before the episode is cut off.")
    outcome: Literal["goal", "pit", "timeout"] | None = Field(
        default=None, description="How the episode ended, once it has."
    )
    text: str = Field(default="", description="The grid and your situation in words, for a language model.")


class GridState(State):
    """Episode id, step count and the layout's settings."""

    size: int = 0
    walls: float = 0.0
    pits: int = 0
    slip: float = 0.0
    seed: int | None = None
