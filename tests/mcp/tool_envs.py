"""Environments with tools, for the MCP tests (module level, so tool type hints resolve)."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from openenv import Action, CallToolAction, CallToolObservation, Environment, Observation, State, tool


class NoteAction(Action):
    text: str


class NoteObservation(Observation):
    notes: list[str] = Field(default_factory=list)


class _ArrayLike:
    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows

    def tolist(self) -> list[list[int]]:
        return self.rows


class Point(BaseModel):
    x: int
    y: int = 0


class ToolEnv(Environment[NoteAction, NoteObservation, State]):
    """Keeps notes; its tools read and change them."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.steps = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> NoteObservation:
        self.notes = []
        self.steps = 0
        return NoteObservation(notes=[])

    def step(self, action: NoteAction, timeout_s: float | None = None, **kwargs: Any) -> NoteObservation:
        self.steps += 1
        self.notes.append(action.text)
        return NoteObservation(notes=list(self.notes), reward=1.0)

    @property
    def state(self) -> State:
        return State(step_count=self.steps)

    @tool
    def add(self, a: int, b: int = 2) -> int:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        return a + b

    @tool
    def note(self, text: Annotated[str, Field(min_length=1)], tag: Literal["todo", "done"] = "todo") -> dict[str, Any]:
        """Append a note to this session's list.

        Args:
            text: What to write down.
            tag: The note's status.
        """
        self.notes.append(f"{tag}:{text}")
        return {"count": len(self.notes), "notes": list(self.notes)}

    @tool
    def norm(self, p: Point) -> Point:
        """Reflect a point through the origin."""
        return Point(x=-p.x, y=-p.y)

    @tool
    def boom(self, reason: str = "kaboom") -> None:
        """Always fails."""
        raise ValueError(reason)

    @tool(timeout_s=0.3)
    def wait_sync(self, seconds: float = 1.0) -> str:
        """Blocks its worker thread longer than its time limit."""
        time.sleep(seconds)
        return "woke"

    @tool(timeout_s=0.3)
    async def wait_async(self, seconds: float = 10.0) -> str:
        """Sleeps on the event loop."""
        await asyncio.sleep(seconds)
        return "slept"

    @tool
    def blocking(self, seconds: float) -> str:
        """Sleeps in a worker thread (never on the event loop)."""
        time.sleep(seconds)
        return "done"

    @tool
    def raw(self) -> Any:
        """Returns something that is not JSON."""
        return object()

    @tool
    async def fails_with_timeout(self) -> None:
        """Raises its own TimeoutError (which is not the call running out of time)."""
        raise TimeoutError("upstream service took too long")

    @tool
    def array(self) -> Any:
        """Returns an array-like (anything with tolist())."""
        return _ArrayLike([[1, 2], [3, 4]])

    def after_tool_call(self, action: CallToolAction, observation: CallToolObservation) -> CallToolObservation:
        observation.reward = 0.5 if observation.error is None else -1.0
        return observation


class PlainEnv(Environment[NoteAction, NoteObservation, State]):
    """No tools at all."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> NoteObservation:
        return NoteObservation()

    def step(self, action: NoteAction, timeout_s: float | None = None, **kwargs: Any) -> NoteObservation:
        return NoteObservation(notes=[action.text])

    @property
    def state(self) -> State:
        return State()
