"""A one-question quiz: answer in text."""

from __future__ import annotations

from pydantic import Field

from openenv import Action, Observation


class AnswerAction(Action):
    """The answer, in words."""

    answer: str = Field(description="Your answer.")


class QuestionObservation(Observation):
    """The question, and after an answer whether it was right."""

    question: str = Field(description="What to answer.")
    feedback: str = Field(default="", description="right or wrong, after an answer.")
