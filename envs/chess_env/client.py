"""The typed client of the chess environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import ChessAction, ChessObservation, ChessState
except ImportError:  # run from the env's folder, not as a package
    from models import ChessAction, ChessObservation, ChessState  # type: ignore[no-redef]


class ChessEnv(EnvClient[ChessAction, ChessObservation, ChessState]):
    """`async with ChessEnv(url) as env: await env.step(ChessAction(move="e2e4"))`"""
