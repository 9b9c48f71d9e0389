"""chess_env: play chess against a random mover or a small material-search engine."""

from .client import ChessEnv
from .models import ChessAction, ChessObservation, ChessState

__all__ = ["ChessAction", "ChessEnv", "ChessObservation", "ChessState"]
