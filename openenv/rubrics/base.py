"""`Rubric`: a reward function of `(action, observation)`, composable and async-capable.

Subclass and implement `forward` (a plain `def` or an `async def`), or wrap a function with
`FnRubric`. Rubrics assigned as attributes (or passed to a container) become named children,
so after an evaluation `components()` reports each part's score by its dotted path, e.g.
`{"format": 1.0, "correct": 0.5}`: what `Environment.apply_rubric` puts in the observation's
`metadata["reward_components"]`.

    score = rubric(action, obs)                 # sync rubrics
    score = await rubric.evaluate(action, obs)  # any rubric; async children run concurrently
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

from openenv.errors import RubricError

__all__ = ["FnRubric", "Rubric", "as_rubric"]

Score = float
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class Rubric:
    """Base class of reward functions. Override `forward` (sync or async).

    Class attributes:
        name: the name this rubric gets inside a container or in `reward_components` when the
            container is not told one (default: the class name in snake_case, less "_rubric").

    Subclasses need not call `super().__init__()`.
    """

    name: ClassVar[str | None] = None
    last_score: float | None = None

    def forward(self, action: Any, observation: Any) -> float | Awaitable[float]:
        """Score one step. Return a number (bools count as 0/1); may be an `async def`."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward(action, observation)")

    # -- evaluation ---------------------------------------------------------------------------------

    def __call__(self, action: Any, observation: Any) -> float:
        """Score synchronously; returns the score.

        Raises:
            RubricError: the rubric (or a child) is async: use `await rubric.evaluate(...)`; or
                `forward` returned something that is not a finite number.
        """
        if self.is_async:
            raise RubricError(
                f"{self.label} is async (it or a child has an async forward); score it with "
                "`await rubric.evaluate(action, observation)`, e.g. in step_async via `await self.apply_rubric_async(...)`"
            )
        self._clear()
        return self._eval(action, observation)

    async def evaluate(self, action: Any, observation: Any) -> float:
        """Score a step, sync or async; independent async children are awaited concurrently.

        Raises:
            RubricError: `forward` returned something that is not a finite number.
        """
        self._clear()
        return await self._aeval(action, observation)

    def _eval(self, action: Any, observation: Any) -> float:
        return self._record(self._score(action, observation))

    async def _aeval(self, action: Any, observation: Any) -> float:
        return self._record(await self._ascore(action, observation))

    def _score(self, action: Any, observation: Any) -> Any:
        """This node's raw score, sync (containers override this and `_ascore`)."""
        return self.forward(action, observation)

    async def _ascore(self, action: Any, observation: Any) -> Any:
        out = self.forward(action, observation)
        return await out if inspect.isawaitable(out) else out

    def _record(self, value: Any) -> float:
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise RubricError(
                f"{self.label}.forward returned an awaitable in a sync evaluation; use `await rubric.evaluate(...)`"
            )
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)) or isinstance(value, complex):
            raise RubricError(f"{self.label} returned {type(value).__name__}, expected a number")
        score = float(value)
        if not math.isfinite(score):
            raise RubricError(f"{self.label} returned {score}, expected a finite number")
        self.last_score = score
        return score

    def _clear(self) -> None:
        self.last_score = None
        for child in self._children.values():
            child._clear()

    # -- structure ------------------------------------------------------------------------------------

    @property
    def _children(self) -> dict[str, Rubric]:
        children = self.__dict__.get("_rubric_children")
        if children is None:
            children = self.__dict__["_rubric_children"] = {}
        return children

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Rubric) and not name.startswith("_"):
            self._children[name] = value
        object.__setattr__(self, name, value)

    def _adopt(self, name: str, child: Rubric) -> None:
        if "." in name or not name:
            raise RubricError(f"rubric names may not be empty or contain '.', got {name!r}")
        if name in self._children:
            raise RubricError(f"{self.label} already has a child named {name!r}")
        self._children[name] = child

    @property
    def is_async(self) -> bool:
        """Whether evaluating needs `await` (an async `forward` here or in any child)."""
        return self._own_async() or any(child.is_async for child in self._children.values())

    def _own_async(self) -> bool:
        return inspect.iscoroutinefunction(self.forward)

    def named_children(self) -> Iterator[tuple[str, Rubric]]:
        """The direct children, by name."""
        yield from self._children.items()

    def named_rubrics(self, prefix: str = "") -> Iterator[tuple[str, Rubric]]:
        """Every descendant by dotted path, depth-first (`"code"`, `"code.syntax"`, ...)."""
        for name, child in self._children.items():
            path = f"{prefix}.{name}" if prefix else name
            yield path, child
            yield from child.named_rubrics(path)

    def __getitem__(self, path: str) -> Rubric:
        """The descendant at a dotted path. Raises KeyError naming the children there are."""
        node: Rubric = self
        for part in path.split("."):
            child = node._children.get(part)
            if child is None:
                raise KeyError(f"no rubric {path!r}: {node.label} has {sorted(node._children) or 'no children'}")
            node = child
        return node

    def components(self) -> dict[str, float]:
        """The scores of the last evaluation by dotted path (parts not evaluated are left out).

        A rubric without children reports itself under its own name.
        """
        if not self._children:
            return {} if self.last_score is None else {self.default_name(): self.last_score}
        return {path: r.last_score for path, r in self.named_rubrics() if r.last_score is not None}

    def reset(self) -> None:
        """Forget per-episode state (trajectories, last scores), here and in every child.

        Override to clear your own state, and call `super().reset()`.
        """
        self.last_score = None
        for child in self._children.values():
            child.reset()

    def default_name(self) -> str:
        """The name a container gives this rubric when not told one."""
        if self.name:
            return self.name
        snake = _CAMEL.sub("_", type(self).__name__).lower()
        return snake.removesuffix("_rubric") or snake

    @property
    def label(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        kids = ", ".join(self._children)
        return f"{type(self).__name__}({kids})" if kids else f"{type(self).__name__}()"


class FnRubric(Rubric):
    """A rubric made from a function `fn(action, observation) -> number` (sync or async)."""

    def __init__(self, fn: Callable[[Any, Any], Any], name: str | None = None) -> None:
        if not callable(fn):
            raise RubricError(f"FnRubric needs a callable fn(action, observation), got {fn!r}")
        self.fn = fn
        fn_name = getattr(fn, "__name__", "") or ""
        self._name = name or (fn_name if fn_name.isidentifier() else None)

    def forward(self, action: Any, observation: Any) -> Any:
        return self.fn(action, observation)

    def _own_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(type(self.fn).__call__)

    def default_name(self) -> str:
        return self._name or "fn"

    @property
    def label(self) -> str:
        return f"FnRubric({self.default_name()})"


def as_rubric(value: Rubric | Callable[[Any, Any], Any], name: str | None = None) -> Rubric:
    """A rubric as is, or a function wrapped in `FnRubric`.

    Raises:
        RubricError: `value` is neither.
    """
    if isinstance(value, Rubric):
        return value
    if callable(value):
        return FnRubric(value, name)
    raise RubricError(f"expected a Rubric or a function (action, observation) -> score, got {type(value).__name__}")
