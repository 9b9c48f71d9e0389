"""An Open Reward Standard environment (a class deriving from `openreward.environments.Environment`)
served as an OpenEnv environment. `openenv import --type ors` writes a folder whose server subclasses
`ORSEnvironment`; it needs `openreward` (the `ors` extra).

| ORS | OpenEnv |
|---|---|
| `list_splits`, `list_tasks`, `num_tasks`, `get_task`, `get_task_range` | the Task API, as they answer |
| a session: `Env(task_spec=...)`, `setup`, `get_prompt` | `reset(split=, index=)`: the observation's `prompt` blocks and the `tools` to call |
| a tool call and its `ToolOutput` | `step(ORSAction(tool=, arguments=))`: its `blocks`, `reward` and `finished` as `done`; a refused call's `error` |
| `teardown` | `close()`, and the next `reset` |
"""

from __future__ import annotations

import typing
import uuid
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.interop._sources import jsonable, resolve
from openenv.types import Action, Observation, State

__all__ = ["ORSAction", "ORSEnvironment", "ORSObservation", "ORSState"]


class ORSAction(Action):
    """One call of one of the environment's tools."""

    tool: str = Field(description="the tool's name (the reset observation lists them)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="its input, as its schema says")


class ORSObservation(Observation):
    """The task's prompt and tools (on reset), or a tool call's output (on step)."""

    blocks: list[dict[str, Any]] = Field(default_factory=list, description="prompt or tool output blocks")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="name, description, input_schema")
    error: str | None = Field(default=None, description="why the tool call was refused")


class ORSState(State):
    """Which task is played and what its tool calls earned."""

    split: str | None = None
    index: int | None = None
    total_reward: float = 0.0
    finished: bool = False


class ORSEnvironment(Environment[ORSAction, ORSObservation, ORSState]):
    """Base of an imported ORS environment: set `ORS_CLASS` to the source's environment class."""

    ORS_CLASS: ClassVar[type[Any]]

    def __init__(self) -> None:
        super().__init__()
        self._state = ORSState()
        self._session: Any = None

    # -- tasks: the class's own answers ----------------------------------------------------------

    def list_splits(self) -> list[Any]:
        from openenv.server.tasks import split_entry  # the server's (fastapi); the models stay client-light

        return [
            split_entry(jsonable(s) if not isinstance(s, str) else s) for s in resolve(self.ORS_CLASS.list_splits())
        ]

    def _split_names(self) -> list[str]:
        return [entry["name"] for entry in self.list_splits()]

    def _known(self, split: str) -> None:
        if split not in (names := self._split_names()):
            raise KeyError(f"no split {split!r}; there are {names}")

    def list_tasks(self, split: str) -> list[Any]:
        self._known(split)
        return list(jsonable(resolve(self.ORS_CLASS.list_tasks(split))))

    def num_tasks(self, split: str) -> int:
        self._known(split)
        return int(resolve(self.ORS_CLASS.num_tasks(split)))

    def get_task(self, split: str, index: int) -> Any:
        count = self.num_tasks(split)
        if not 0 <= index < count:
            raise IndexError(f"split {split!r} has {count} tasks; no index {index}")
        return jsonable(resolve(self.ORS_CLASS.get_task(split, index)))

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        self._known(split)
        return list(jsonable(resolve(self.ORS_CLASS.get_task_range(split, start, stop))))

    # -- episodes ------------------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> ORSObservation:
        """Start a session on task `index` of `split` (default: the first split; with no index, the
        seed's task)."""
        self.close()
        split = split or self._split_names()[0]
        index = index if index is not None else (seed or 0) % self.num_tasks(split)
        task = self.get_task(split, index)
        session = self.ORS_CLASS(task_spec=task, secrets={})
        resolve(session.setup())
        self._session = session
        self._state = ORSState(episode_id=episode_id or str(uuid.uuid4()), split=split, index=index)
        tools = [*resolve(self.ORS_CLASS.list_tools()).tools, *resolve(session.list_task_tools()).tools]
        return ORSObservation(
            blocks=jsonable(resolve(session.get_prompt())),
            tools=[jsonable(t) for t in tools],
            metadata={"split": split, "index": index, "task": task},
        )

    def step(self, action: ORSAction, timeout_s: float | None = None, **kwargs: Any) -> ORSObservation:
        return typing.cast(ORSObservation, resolve(self.step_async(action, timeout_s=timeout_s)))

    async def step_async(self, action: ORSAction, timeout_s: float | None = None, **kwargs: Any) -> ORSObservation:
        """Call the tool; its reward is the step's, and `finished` ends the episode."""
        if self._session is None or self._state.finished:
            raise RuntimeError("call reset() first: tools act within an episode")
        result = (await self._session._call_tool(action.tool, dict(action.arguments))).root
        self._state.step_count += 1
        if not result.ok:
            return ORSObservation(
                error=str(result.error), metadata={"reason": jsonable(getattr(result, "reason", None))}
            )
        output = result.output
        reward = None if output.reward is None else float(output.reward)
        self._state.total_reward += reward or 0.0
        self._state.finished = bool(output.finished)
        return ORSObservation(
            blocks=jsonable(output.blocks),
            reward=reward,
            done=self._state.finished,
            metadata=jsonable(output.metadata) or {},
        )

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            resolve(session.teardown())

    @property
    def state(self) -> ORSState:
        return self._state
