"""Rubrics in an environment served for real: the client receives the reward, its named
components and, at the end of an episode, the discounted per-step credit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from openenv import Action, EnvClient, EnvExecutionError, Environment, Observation, ServerSettings, State, create_app
from openenv.rubrics import Gate, Rubric, TrajectoryRubric, WeightedSum
from tests.support.servers import serve_app


class GuessAction(Action):
    answer: str


class GuessObservation(Observation):
    feedback: str = ""


class FormatOk(Rubric):
    def forward(self, action: GuessAction, observation: GuessObservation) -> bool:
        return action.answer.isalpha()


class Exact(Rubric):
    def __init__(self, target: str) -> None:
        self.target = target

    def forward(self, action: GuessAction, observation: GuessObservation) -> float:
        return 1.0 if action.answer == self.target else 0.0


class Solved(TrajectoryRubric):
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        return 1.0 if trajectory[-1][1].feedback == "correct" else 0.0


class AsyncJudge(Rubric):
    async def forward(self, action: GuessAction, observation: GuessObservation) -> float:
        await asyncio.sleep(0)
        return 0.5


class GuessEnv(Environment[GuessAction, GuessObservation, State]):
    """Guess the word "paris" within three tries."""

    def __init__(self) -> None:
        self.tries = 0
        self.rubric = WeightedSum(
            answer=(Gate(Exact("paris"), when=FormatOk()), 0.8),
            brevity=(lambda a, o: 1.0 if len(a.answer) <= 5 else 0.0, 0.2),
            outcome=(Solved(gamma=0.5), 1.0),
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        self.tries = 0
        self.reset_rubric()
        return GuessObservation(feedback="guess a capital")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self.tries += 1
        correct = action.answer == "paris"
        obs = GuessObservation(feedback="correct" if correct else "wrong", done=correct or self.tries >= 3)
        return self.apply_rubric(action, obs)

    @property
    def state(self) -> State:
        return State(step_count=self.tries)


class AsyncGuessEnv(GuessEnv):
    def __init__(self) -> None:
        super().__init__()
        self.rubric = WeightedSum(judge=(AsyncJudge(), 1.0), answer=(Exact("paris"), 1.0))

    async def step_async(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self.tries += 1
        return await self.apply_rubric_async(action, GuessObservation(feedback="ok"))


class MisusedEnv(AsyncGuessEnv):
    """Scores an async rubric from a sync step: an author's mistake the client must hear about."""

    step_async = Environment.step_async

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        return self.apply_rubric(action, GuessObservation())


Client = EnvClient[GuessAction, GuessObservation, State]


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    settings = ServerSettings(max_sessions=4)
    with (
        serve_app(create_app(GuessEnv, GuessAction, GuessObservation, settings=settings)) as sync_url,
        serve_app(create_app(AsyncGuessEnv, GuessAction, GuessObservation, settings=settings)) as async_url,
        serve_app(create_app(MisusedEnv, GuessAction, GuessObservation, settings=settings)) as misused_url,
    ):
        yield {"sync": sync_url, "async": async_url, "misused": misused_url}


async def test_client_receives_reward_components(urls: dict[str, str]) -> None:
    async with Client(urls["sync"]) as env:
        for _episode in range(2):  # the second episode proves reset_rubric cleared the trajectory
            first = await env.reset()
            assert first.observation.metadata == {}
            wrong = await env.step(GuessAction(answer="rome1"))
            assert wrong.reward == pytest.approx(0.2)
            assert wrong.observation.metadata["reward_components"] == {
                "answer": 0.0,
                "answer.format_ok": 0.0,
                "brevity": 1.0,
                "outcome": 0.0,
            }
            right = await env.step(GuessAction(answer="paris"))
            assert right.done and right.reward == pytest.approx(0.8 + 0.2 + 1.0)
            meta = right.observation.metadata
            assert meta["reward_components"] == {
                "answer": 1.0,
                "answer.exact": 1.0,
                "answer.format_ok": 1.0,
                "brevity": 1.0,
                "outcome": 1.0,
            }
            assert meta["trajectory_rewards"] == {"outcome": [0.5, 1.0]}


async def test_lost_episode_reports_zero_outcome(urls: dict[str, str]) -> None:
    async with Client(urls["sync"]) as env:
        await env.reset()
        for answer in ("berlin", "madrid"):
            assert not (await env.step(GuessAction(answer=answer))).done
        last = await env.step(GuessAction(answer="lisbon"))
        assert last.done and last.reward == 0.0
        assert last.observation.metadata["trajectory_rewards"] == {"outcome": [0.0, 0.0, 0.0]}


async def test_async_rubric_in_an_async_env(urls: dict[str, str]) -> None:
    async with Client(urls["async"]) as env:
        await env.reset()
        result = await env.step(GuessAction(answer="paris"))
        assert result.reward == pytest.approx(1.5)
        assert result.observation.metadata["reward_components"] == {"judge": 0.5, "answer": 1.0}


async def test_misused_async_rubric_is_a_clear_error(urls: dict[str, str]) -> None:
    async with Client(urls["misused"]) as env:
        await env.reset()
        with pytest.raises(EnvExecutionError, match="apply_rubric_async"):
            await env.step(GuessAction(answer="x"))
        assert (await env.state()).step_count == 0  # the session is still usable
