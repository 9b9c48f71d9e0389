"""blackjack_env: one hand of blackjack per episode, seedable, with a text view for language models."""

from .client import BlackjackEnv
from .models import BlackjackAction, BlackjackObservation, BlackjackState

__all__ = ["BlackjackAction", "BlackjackEnv", "BlackjackObservation", "BlackjackState"]
