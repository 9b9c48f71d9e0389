"""The echo environment's models: what a client sends and what it gets back."""

from __future__ import annotations

from pydantic import Field

from openenv import Action, Observation, State


class EchoAction(Action):
    """Send a message to be echoed back."""

    message: str = Field(description="The text to echo.")


class EchoObservation(Observation):
    """The echoed message and its length; reward is 0.1 × length up to 1,000 characters, else 0."""

    echoed_message: str = Field(description="The message, as received.")
    message_length: int = Field(default=0, ge=0, description="Length of the message in characters.")


class EchoState(State):
    """Episode id, step count, and the total length echoed so far."""

    total_length: int = 0
