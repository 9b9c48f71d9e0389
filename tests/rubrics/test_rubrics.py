"""Rubrics on their own: composition, naming, gating, sequences, async, trajectories."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv import Observation
from openenv.rubrics import (
    FnRubric,
    Gate,
    Rubric,
    RubricError,
    Sequential,
    TrajectoryRubric,
    WeightedSum,
    discounted_returns,
)


class Length(Rubric):
    """Score: the action's length / 10."""

    def forward(self, action: Any, observation: Any) -> float:
        return len(action) / 10


class FormatRubric(Rubric):
    def forward(self, action: Any, observation: Any) -> bool:
        return action.startswith("<")


class Counting(Rubric):
    def __init__(self, score: float) -> None:
        self.score = score
        self.calls = 0

    def forward(self, action: Any, observation: Any) -> float:
        self.calls += 1
        return self.score


def obs(done: bool = False, **metadata: Any) -> Observation:
    return Observation(done=done, metadata=metadata)


def test_leaf_rubric_and_its_name() -> None:
    rubric = Length()
    assert rubric("abcde", obs()) == 0.5
    assert rubric.last_score == 0.5
    assert rubric.components() == {"length": 0.5}
    assert FormatRubric().default_name() == "format"  # "_rubric" is dropped
    assert FormatRubric()("<a>", obs()) == 1.0  # bools are 0/1


def test_weighted_sum_reports_named_components() -> None:
    rubric = WeightedSum(length=(Length(), 0.5), fmt=(FormatRubric(), 2.0), penalty=(lambda a, o: 1.0, -0.25))
    assert rubric("<abc", obs()) == pytest.approx(0.5 * 0.4 + 2.0 * 1.0 - 0.25)
    assert rubric.components() == {"length": 0.4, "fmt": 1.0, "penalty": 1.0}
    assert rubric.weights == {"length": 0.5, "fmt": 2.0, "penalty": -0.25}


def test_positional_children_are_named_after_themselves() -> None:
    def brevity(action: Any, observation: Any) -> float:
        return 1.0 if len(action) < 3 else 0.0

    rubric = WeightedSum((Length(), 1.0), (Length(), 1.0), (brevity, 1.0))
    rubric("ab", obs())
    assert rubric.components() == {"length": 0.2, "length_2": 0.2, "brevity": 1.0}
    assert isinstance(rubric["brevity"], FnRubric)


def test_nested_components_use_dotted_paths() -> None:
    inner = WeightedSum(length=(Length(), 1.0))
    rubric = WeightedSum(code=(inner, 0.5), fmt=(FormatRubric(), 0.5))
    rubric("<abc", obs())
    assert rubric.components() == {"code": 0.4, "code.length": 0.4, "fmt": 1.0}
    assert rubric["code.length"] is inner["length"]
    with pytest.raises(KeyError, match="has \\['length'\\]"):
        rubric["code.nope"]


def test_gate_zeroes_unless_the_condition_holds() -> None:
    judge = Counting(0.7)
    rubric = Gate(judge, when=FormatRubric())
    assert rubric("<ok>", obs()) == 0.7
    assert rubric.components() == {"counting": 0.7, "format": 1.0}
    assert rubric("plain", obs()) == 0.0
    assert judge.calls == 1, "the gated rubric is not scored when the condition fails"
    assert rubric.components() == {"format": 0.0}


def test_gate_on_its_own_score_with_threshold() -> None:
    rubric = Gate(Length(), threshold=0.5)
    assert rubric("abcd", obs()) == 0.0
    assert rubric("abcdef", obs()) == pytest.approx(0.6)
    assert Gate(lambda a, o: 0.3, when=lambda a, o: a == "yes")("yes", obs()) == 0.3


def test_sequential_stops_at_the_first_zero() -> None:
    last = Counting(0.9)
    rubric = Sequential(fmt=FormatRubric(), length=Gate(Length(), threshold=0.3), final=last)
    assert rubric("<abc", obs()) == 0.9
    assert rubric.components() == {"fmt": 1.0, "length": 0.4, "length.length": 0.4, "final": 0.9}
    assert rubric("<a", obs()) == 0.0
    assert last.calls == 1
    assert rubric.components() == {"fmt": 1.0, "length": 0.0, "length.length": 0.2}


def test_bad_scores_and_bad_construction_are_refused() -> None:
    with pytest.raises(RubricError, match="returned str"):
        FnRubric(lambda a, o: "high")(None, obs())
    with pytest.raises(RubricError, match="finite"):
        FnRubric(lambda a, o: float("nan"))(None, obs())
    with pytest.raises(RubricError, match="pairs"):
        WeightedSum(Length())  # type: ignore[arg-type]
    with pytest.raises(RubricError, match="finite number"):
        WeightedSum(a=(Length(), float("inf")))
    with pytest.raises(RubricError, match="at least one"):
        Sequential()
    with pytest.raises(RubricError, match="expected a Rubric or a function"):
        Gate(3)  # type: ignore[arg-type]


class SlowJudge(Rubric):
    """Async: waits for its partner to start, so it only finishes if both run at once."""

    def __init__(self, mine: asyncio.Event, partner: asyncio.Event, score: float) -> None:
        self.mine, self.partner, self.score = mine, partner, score

    async def forward(self, action: Any, observation: Any) -> float:
        self.mine.set()
        await asyncio.wait_for(self.partner.wait(), 5)
        return self.score


async def test_async_children_are_scored_concurrently() -> None:
    a, b = asyncio.Event(), asyncio.Event()
    rubric = WeightedSum(first=(SlowJudge(a, b, 1.0), 0.5), second=(SlowJudge(b, a, 0.5), 0.5), length=(Length(), 1.0))
    assert rubric.is_async
    assert await rubric.evaluate("abc", obs()) == pytest.approx(0.75 + 0.3)
    assert rubric.components() == {"first": 1.0, "second": 0.5, "length": 0.3}


async def test_async_rubrics_need_evaluate() -> None:
    async def judge(action: Any, observation: Any) -> float:
        await asyncio.sleep(0)
        return 0.25

    rubric = Gate(judge, when=FormatRubric())
    with pytest.raises(RubricError, match=r"await rubric\.evaluate"):
        rubric("<x", obs())
    assert await rubric.evaluate("<x", obs()) == 0.25
    assert await Length().evaluate("ab", obs()) == 0.2  # sync rubrics evaluate too


class Won(TrajectoryRubric):
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        _, last = trajectory[-1]
        return 1.0 if last.metadata.get("winner") == "agent" else 0.0


def test_trajectory_rubric_scores_at_the_end_and_discounts() -> None:
    rubric = Won(gamma=0.5, intermediate=-0.01)
    assert rubric("e2e4", obs()) == -0.01
    assert rubric("d2d4", obs()) == -0.01
    with pytest.raises(RubricError, match="finished episode"):
        rubric.step_rewards()
    assert rubric("mate", obs(done=True, winner="agent")) == 1.0
    assert rubric.finished and [a for a, _ in rubric.trajectory] == ["e2e4", "d2d4", "mate"]
    assert rubric.step_rewards() == [0.25, 0.5, 1.0]
    with pytest.raises(RubricError, match="already ended"):
        rubric("again", obs())
    rubric.reset()
    assert rubric.trajectory == [] and not rubric.finished
    assert rubric("x", obs(done=True)) == 0.0


async def test_async_trajectory_rubric() -> None:
    class Judge(TrajectoryRubric):
        async def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
            await asyncio.sleep(0)
            return len(trajectory) / 4

    rubric = Judge(gamma=1.0)
    assert rubric.is_async
    for _ in range(3):
        assert await rubric.evaluate("a", obs()) == 0.0
    assert await rubric.evaluate("a", obs(done=True)) == 1.0
    assert rubric.step_rewards() == [1.0, 1.0, 1.0, 1.0]


def test_discounted_returns() -> None:
    assert discounted_returns([0.0, 0.0, 1.0], 0.9) == pytest.approx([0.81, 0.9, 1.0])
    assert discounted_returns([1.0, 1.0], 0.0) == [1.0, 1.0]
    assert discounted_returns([], 0.5) == []
    with pytest.raises(RubricError, match="gamma"):
        discounted_returns([1.0], 1.5)
    with pytest.raises(RubricError, match="gamma"):
        Won(gamma=-0.1)


def test_reset_reaches_every_child_and_custom_composites_register_children() -> None:
    class Composite(Rubric):
        def __init__(self) -> None:
            self.outcome = Won()
            self.style = FormatRubric()

        def forward(self, action: Any, observation: Any) -> float:
            return self.outcome(action, observation) + self.style(action, observation)

    rubric = Composite()
    assert [name for name, _ in rubric.named_children()] == ["outcome", "style"]
    assert rubric("<x", obs(done=True, winner="agent")) == 2.0
    assert rubric.components() == {"outcome": 1.0, "style": 1.0}
    assert rubric["outcome"].finished
    rubric.reset()
    assert not rubric["outcome"].finished and rubric.components() == {}
