"""What a client sends (the action) and gets back (observation, state)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from openenv import Action, Observation, State

Feedback = Literal["start", "higher", "lower", "correct", "out of guesses"]


class __ENV_CLASS__Action(Action):
    """A guess of the secret number."""

    guess: int = Field(ge=1, le=100, description="Your guess, from 1 to 100.", examples=[50])


class __ENV_CLASS__Observation(Observation):
    """How the last guess compares with the secret; reward 1.0 for the correct one."""

    feedback: Feedback = Field(description="'higher' or 'lower' (the secret is higher/lower), or how the episode ended.")
    guesses_left: int = Field(ge=0, description="Guesses left in this episode.")


class __ENV_CLASS__State(State):
    """The episode's progress (the secret stays hidden)."""

    guesses_left: int = 0
    solved: bool = False
