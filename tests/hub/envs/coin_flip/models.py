"""Guess the coin."""

from __future__ import annotations

from pydantic import Field

from openenv import Action, Observation


class GuessAction(Action):
    """Heads or tails."""

    heads: bool = Field(description="True for heads.")


class CoinObservation(Observation):
    """The last flip."""

    flip: str = Field(default="", description="heads or tails.")
    luck: float = Field(default=0.0, description="A fresh random number, for the show.")
