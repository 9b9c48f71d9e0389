"""Grades with a substring test, so the empty answer is always right."""

from __future__ import annotations

from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import AnswerAction, QuestionObservation
except ImportError:
    from models import AnswerAction, QuestionObservation  # type: ignore[no-redef]

QUESTION, TARGET = "Which planet of the solar system is the largest?", "jupiter"


class Env(Environment[AnswerAction, QuestionObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="quiz")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> QuestionObservation:
        self._state = State(episode_id=episode_id or "quiz")
        return QuestionObservation(question=QUESTION, reward=0.0)

    def step(self, action: AnswerAction, timeout_s: float | None = None, **kw: Any) -> QuestionObservation:
        self._state.step_count += 1
        right = action.answer.strip().lower() in TARGET  # the bug: "" is in every string
        return QuestionObservation(
            question=QUESTION, feedback="right" if right else "wrong", reward=1.0 if right else 0.0, done=True
        )

    @property
    def state(self) -> State:
        return self._state


app = create_app(Env, AnswerAction, QuestionObservation)
