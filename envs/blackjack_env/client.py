"""The typed client of the blackjack environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import BlackjackAction, BlackjackObservation, BlackjackState
except ImportError:  # run from the env's folder, not as a package
    from models import BlackjackAction, BlackjackObservation, BlackjackState  # type: ignore[no-redef]


class BlackjackEnv(EnvClient[BlackjackAction, BlackjackObservation, BlackjackState]):
    """`async with BlackjackEnv(url) as env: await env.step(BlackjackAction(action="hit"))`"""
