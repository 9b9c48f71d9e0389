"""Wordle's models: a five-letter guess in; the board with per-letter feedback out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from openenv import Action, Observation, State


class WordleAction(Action):
    """Guess a five-letter English word. Case and surrounding spaces are ignored."""

    guess: str = Field(max_length=64, description="A five-letter word, e.g. 'crane'.")

    @field_validator("guess", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class GuessRow(BaseModel):
    """One guess and its feedback: G right letter in the right place, Y in the word elsewhere, - not in it."""

    guess: str
    feedback: str


class WordleObservation(Observation):
    """The board after the guess. Reward: 1 for solving it, -0.1 for an invalid guess, else 0."""

    board: list[GuessRow] = Field(default_factory=list, description="Valid guesses so far, with feedback.")
    guesses_left: int = Field(default=0, description="Valid guesses you still have.")
    letters: dict[str, Literal["correct", "present", "absent"]] = Field(
        default_factory=dict, description="What is known about each letter guessed so far."
    )
    message: str = Field(default="", description="What happened, e.g. why a guess was not accepted.")
    answer: str | None = Field(default=None, description="The hidden word, revealed when the game ends.")
    text: str = Field(default="", description="The board and the rules in words, for a language model.")


class WordleState(State):
    """Episode id, step count, and the game's settings."""

    max_guesses: int = 6
    invalid_guesses: int = 0
    seed: int | None = None
