"""The blackjack environment's models: `hit` or `stand` in; the table, as fields and as text, out."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from openenv import Action, Observation, State


class BlackjackAction(Action):
    """Take another card (`hit`) or end your turn (`stand`). Case and spaces are ignored."""

    action: Literal["hit", "stand"] = Field(description='"hit" or "stand".')

    @field_validator("action", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class BlackjackObservation(Observation):
    """The table after the last action. Reward (at the end): +1 win, +1.5 blackjack, 0 push, -1 loss."""

    text: str = Field(default="", description="The table described in words, ready for a language model's prompt.")
    player_cards: list[str] = Field(default_factory=list, description='Your cards, e.g. ["K♠", "7♥"].')
    player_total: int = Field(default=0, description="Best total of your hand (aces count 11 unless that busts).")
    usable_ace: bool = Field(default=False, description="Your hand holds an ace counted as 11.")
    dealer_cards: list[str] = Field(
        default_factory=list, description="The dealer's visible cards (all of them once the hand is over)."
    )
    dealer_total: int = Field(default=0, description="Total of the dealer's visible cards.")
    legal_actions: list[str] = Field(
        default_factory=list, description="What you may do now (empty once the hand is over)."
    )
    outcome: Literal["win", "blackjack", "push", "loss"] | None = Field(
        default=None, description="Result, once the hand is over."
    )


class BlackjackState(State):
    """Episode id, step count, the rules in force and the seed."""

    decks: int = 0
    blackjack_payout: float = 1.5
    seed: int | None = None
