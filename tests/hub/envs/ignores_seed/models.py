"""A walk on a line: move -1, 0 or +1; the episode ends at 0."""

from __future__ import annotations

from pydantic import Field

from openenv import Action, Observation


class MoveAction(Action):
    """Which way to move."""

    move: int = Field(ge=-1, le=1, description="-1, 0 or +1.")


class PositionObservation(Observation):
    """Where the walker stands."""

    position: int = Field(description="The walker's position; the goal is 0.")
