"""wordle_env: guess the hidden five-letter word in six tries, with a bundled word list."""

from .client import WordleEnv
from .models import GuessRow, WordleAction, WordleObservation, WordleState

__all__ = ["GuessRow", "WordleAction", "WordleEnv", "WordleObservation", "WordleState"]
