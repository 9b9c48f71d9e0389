"""The typed client of the Wordle environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import WordleAction, WordleObservation, WordleState
except ImportError:  # run from the env's folder, not as a package
    from models import WordleAction, WordleObservation, WordleState  # type: ignore[no-redef]


class WordleEnv(EnvClient[WordleAction, WordleObservation, WordleState]):
    """`async with WordleEnv(url) as env: await env.step(WordleAction(guess="crane"))`"""
