"""A Verifiers environment (Prime Intellect's `verifiers`, the 0.1 API: `load_environment()` giving a
`SingleTurnEnv`, `ToolEnv`, ...) served as an OpenEnv environment. `openenv import --type verifiers`
writes a folder whose server subclasses `VerifiersEnvironment`; it needs `verifiers` (the `verifiers`
extra).

| Verifiers | OpenEnv |
|---|---|
| `dataset`, `eval_dataset` rows | the Task API's splits `train` and `eval`; `reset(split=, index=)` plays one |
| a row's `prompt` (chat messages), `info` | the reset observation's `prompt`, `info` (never its `answer`) |
| the model's final answer | `step(VerifiersAction(completion=...))`, which ends the episode |
| the rubric (`score_rollout`) | that step's reward; each reward function's score in `metrics` |
| a `ToolEnv`'s tools | MCP tools of the same names and arguments; their calls are part of the scored completion |
"""

from __future__ import annotations

import importlib
import inspect
import json
import threading
import typing
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.interop._sources import jsonable, resolve
from openenv.mcp.tools import tool
from openenv.types import Action, Observation, State

__all__ = ["VerifiersAction", "VerifiersEnvironment", "VerifiersObservation", "VerifiersState"]

_SPLITS = {"train": "dataset", "eval": "eval_dataset"}
_HIDDEN = frozenset({"answer"})  # what a reset observation never shows (the rubric's reference)


class VerifiersAction(Action):
    """The model's final answer to the task's prompt; scored by the environment's rubric."""

    completion: str = Field(description="the final assistant message")


class VerifiersObservation(Observation):
    """The task (on reset) or its score (on step)."""

    prompt: list[dict[str, Any]] = Field(default_factory=list, description="the task's chat messages")
    info: dict[str, Any] = Field(default_factory=dict, description="the task row's info")
    metrics: dict[str, float] = Field(default_factory=dict, description="each reward function's score")


class VerifiersState(State):
    """Which task is played, and the messages of its tool calls so far."""

    split: str | None = None
    index: int | None = None
    reward: float | None = None


class VerifiersEnvironment(Environment[VerifiersAction, VerifiersObservation, VerifiersState]):
    """Base of an imported Verifiers environment: set `LOAD_ENVIRONMENT` (the source's
    `load_environment`), then call `add_source_tools()` on the subclass."""

    LOAD_ENVIRONMENT: ClassVar[Callable[..., Any]]
    _loaded: ClassVar[Any] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        super().__init__()
        self._state = VerifiersState()
        self._row: dict[str, Any] | None = None
        self._messages: list[dict[str, Any]] = []

    @classmethod
    def source_env(cls) -> Any:
        """The Verifiers environment, loaded once per process (its datasets are built once)."""
        with cls._lock:
            if cls.__dict__.get("_loaded") is None:
                cls._loaded = resolve(cls.LOAD_ENVIRONMENT())
            return cls._loaded

    @classmethod
    def add_source_tools(cls) -> list[str]:
        """Make each tool of the source's `tool_map` (a `ToolEnv`'s) an MCP tool of this class; returns
        their names. Call it once, right after defining the subclass."""
        added = []
        for name, fn in dict(getattr(cls.source_env(), "tool_map", None) or {}).items():
            setattr(cls, f"_source_tool_{name}", tool(name=name)(_tool_method(name, fn)))
            added.append(name)
        return added

    # -- tasks ---------------------------------------------------------------------------------

    def _dataset(self, split: str) -> Any:
        data = getattr(self.source_env(), _SPLITS[split], None) if split in _SPLITS else None
        if data is None:
            raise KeyError(f"no split {split!r}; there are {self.list_splits()}")
        return data

    def list_splits(self) -> list[Any]:
        return [name for name, attr in _SPLITS.items() if getattr(self.source_env(), attr, None) is not None]

    def list_tasks(self, split: str) -> list[Any]:
        return [self.get_task(split, i) for i in range(self.num_tasks(split))]

    def num_tasks(self, split: str) -> int:
        return len(self._dataset(split))

    def get_task(self, split: str, index: int) -> Any:
        data = self._dataset(split)
        if not 0 <= index < len(data):
            raise IndexError(f"split {split!r} has {len(data)} tasks; no index {index}")
        return jsonable(dict(data[index]))

    # -- episodes ------------------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> VerifiersObservation:
        """Play task `index` of `split` (default: the first split; with no index, the seed's task)."""
        split = split or self.list_splits()[0]
        count = self.num_tasks(split)
        index = index if index is not None else (seed or 0) % count
        self._row = self.get_task(split, index)
        self._messages = []
        self._state = VerifiersState(episode_id=episode_id or str(uuid.uuid4()), split=split, index=index)
        shown = {k: v for k, v in self._row.items() if k not in _HIDDEN}
        return VerifiersObservation(
            prompt=list(shown.get("prompt") or []),
            info=dict(shown.get("info") or {}),
            metadata={"split": split, "index": index, "example_id": shown.get("example_id")},
        )

    def step(self, action: VerifiersAction, timeout_s: float | None = None, **kwargs: Any) -> VerifiersObservation:
        return typing.cast(VerifiersObservation, resolve(self.step_async(action, timeout_s=timeout_s)))

    async def step_async(
        self, action: VerifiersAction, timeout_s: float | None = None, **kwargs: Any
    ) -> VerifiersObservation:
        """Score the answer (with the tool calls before it) by the rubric; the episode ends."""
        if self._row is None or self._state.reward is not None:
            raise RuntimeError("call reset() first: each episode takes one answer")
        # The library's own types (its rubrics read their fields); imported here, where it is served.
        types = importlib.import_module("verifiers.types")
        AssistantMessage, ToolCall, ToolMessage = types.AssistantMessage, types.ToolCall, types.ToolMessage
        RolloutState = types.State

        completion: list[Any] = []
        for message in self._messages:
            if message["role"] == "tool":
                completion.append(ToolMessage(tool_call_id=message["tool_call_id"], content=message["content"]))
            else:
                calls = [
                    ToolCall(id=c["id"], name=c["function"]["name"], arguments=json.dumps(c["function"]["arguments"]))
                    for c in message["tool_calls"]
                ]
                completion.append(AssistantMessage(content=message["content"] or None, tool_calls=calls))
        completion.append(AssistantMessage(content=action.completion))
        row = self._row
        rollout = RolloutState(
            input={k: row[k] for k in ("prompt", "answer", "info", "example_id", "task") if k in row},
            completion=completion,
            is_completed=True,
            is_truncated=False,
            trajectory=[],
            reward=None,
            metrics=None,
        )
        await self.source_env().rubric.score_rollout(rollout)
        reward = float(rollout["reward"])
        self._state.step_count += 1
        self._state.reward = reward
        return VerifiersObservation(
            done=True,
            reward=reward,
            metrics={k: float(v) for k, v in (rollout.get("metrics") or {}).items()},
            metadata={"answer": row.get("answer")},
        )

    async def _call_source_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if self._row is None or self._state.reward is not None:
            raise RuntimeError("call reset() first: tools act within an episode")
        fn = self.source_env().tool_map[name]
        result = await _maybe_await(fn(**arguments))
        call_id = f"call_{len(self._messages)}"
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": jsonable(arguments)}}
        self._messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": str(result)},
        ]
        return jsonable(result)

    @property
    def state(self) -> VerifiersState:
        return self._state


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _tool_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A method taking `fn`'s arguments (its signature, resolved type hints and docstring) that calls
    it within the session's episode."""

    async def call(self: VerifiersEnvironment, **arguments: Any) -> Any:
        return await self._call_source_tool(name, arguments)

    sig = inspect.signature(fn)
    me = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    call.__signature__ = sig.replace(parameters=[me, *sig.parameters.values()])  # type: ignore[attr-defined]
    call.__annotations__ = typing.get_type_hints(fn, include_extras=True)
    call.__doc__ = fn.__doc__
    call.__name__ = call.__qualname__ = name
    return call
