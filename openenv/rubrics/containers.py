"""Rubrics made of rubrics: `WeightedSum`, `Gate`, `Sequential`.

Children are named by keyword (`WeightedSum(correct=(Correct(), 0.7), ...)`) or, when passed
positionally, by their own `default_name()` (class name in snake_case, a function's name);
those names are the keys of `reward_components`. Plain functions `(action, observation) ->
number` are accepted wherever a rubric is.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from openenv.errors import RubricError
from openenv.rubrics.base import Rubric, as_rubric

__all__ = ["Gate", "Sequential", "WeightedSum"]

RubricLike = Rubric | Callable[[Any, Any], Any]


def _unique(taken: dict[str, Rubric], name: str) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


class WeightedSum(Rubric):
    """`sum(weight * score)` over the children; async children are awaited concurrently.

        WeightedSum(correct=(Correct(), 0.7), format=(format_ok, 0.3))
        WeightedSum((Correct(), 0.7), (FormatOk(), 0.3))      # named "correct", "format_ok"

    Weights are any finite numbers (negative ones make penalties); they need not sum to 1.

    Raises:
        RubricError: an item is not a `(rubric, weight)` pair, or a weight is not finite.
    """

    def __init__(self, *items: tuple[RubricLike, float], **named: tuple[RubricLike, float]) -> None:
        self.weights: dict[str, float] = {}
        for label, item in [(None, i) for i in items] + list(named.items()):
            if not (isinstance(item, tuple) and len(item) == 2):
                raise RubricError(f"WeightedSum takes (rubric, weight) pairs, got {item!r}")
            rubric, weight = as_rubric(item[0], label), item[1]
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise RubricError(
                    f"the weight of {label or rubric.default_name()!r} must be a finite number, got {weight!r}"
                )
            name = label or _unique(self._children, rubric.default_name())
            self._adopt(name, rubric)
            self.weights[name] = float(weight)
        if not self.weights:
            raise RubricError("WeightedSum needs at least one (rubric, weight) pair")

    def _score(self, action: Any, observation: Any) -> float:
        return sum(self.weights[name] * child._eval(action, observation) for name, child in self._children.items())

    async def _ascore(self, action: Any, observation: Any) -> float:
        children = list(self._children.items())
        if any(child.is_async for _, child in children):
            scores = await asyncio.gather(*(child._aeval(action, observation) for _, child in children))
        else:
            scores = [child._eval(action, observation) for _, child in children]
        return sum(self.weights[name] * score for (name, _), score in zip(children, scores, strict=True))

    def _own_async(self) -> bool:
        return False


class Gate(Rubric):
    """Zero unless a condition holds.

        Gate(Correct(), when=FormatOk())      # Correct()'s score if FormatOk() >= 1, else 0
        Gate(PassesTests(), threshold=0.5)    # the score itself if >= 0.5, else 0

    With `when`, the condition is scored first and the gated rubric only when it passes (so an
    expensive judge is not called for output that fails a cheap check); a skipped rubric is
    left out of `reward_components`. Without `when`, the rubric gates itself.
    """

    def __init__(self, rubric: RubricLike, *, when: RubricLike | None = None, threshold: float = 1.0) -> None:
        if not math.isfinite(threshold):
            raise RubricError(f"threshold must be a finite number, got {threshold!r}")
        self.threshold = float(threshold)
        gated = as_rubric(rubric)
        self._gated_name = gated.default_name() if gated.default_name() != "fn" else "rubric"
        self._adopt(self._gated_name, gated)
        self._when_name: str | None = None
        if when is not None:
            cond = as_rubric(when)
            name = cond.default_name() if cond.default_name() != "fn" else "when"
            self._when_name = _unique(self._children, name)
            self._adopt(self._when_name, cond)

    def _score(self, action: Any, observation: Any) -> float:
        children = self._children
        if self._when_name is not None:
            if children[self._when_name]._eval(action, observation) < self.threshold:
                return 0.0
            return children[self._gated_name]._eval(action, observation)
        score = children[self._gated_name]._eval(action, observation)
        return score if score >= self.threshold else 0.0

    async def _ascore(self, action: Any, observation: Any) -> float:
        children = self._children
        if self._when_name is not None:
            if await children[self._when_name]._aeval(action, observation) < self.threshold:
                return 0.0
            return await children[self._gated_name]._aeval(action, observation)
        score = await children[self._gated_name]._aeval(action, observation)
        return score if score >= self.threshold else 0.0

    def _own_async(self) -> bool:
        return False


class Sequential(Rubric):
    """Score children in order; the first zero stops the chain and scores 0, else the last score.

        Sequential(compiles=Compiles(), tests=Gate(PassesTests(), threshold=0.5), quality=Quality())

    Later children are not scored after a zero (and are left out of `reward_components`).
    """

    def __init__(self, *rubrics: RubricLike, **named: RubricLike) -> None:
        for label, item in [(None, r) for r in rubrics] + list(named.items()):
            rubric = as_rubric(item, label)
            self._adopt(label or _unique(self._children, rubric.default_name()), rubric)
        if not self._children:
            raise RubricError("Sequential needs at least one rubric")

    def _score(self, action: Any, observation: Any) -> float:
        score = 0.0
        for child in self._children.values():
            score = child._eval(action, observation)
            if score == 0.0:
                return 0.0
        return score

    async def _ascore(self, action: Any, observation: Any) -> float:
        score = 0.0
        for child in self._children.values():
            score = await child._aeval(action, observation)
            if score == 0.0:
                return 0.0
        return score

    def _own_async(self) -> bool:
        return False
