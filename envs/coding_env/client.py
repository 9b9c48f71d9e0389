"""The typed client of the coding environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import CodeAction, CodeObservation, CodingState
except ImportError:  # run from the env's folder, not as a package
    from models import CodeAction, CodeObservation, CodingState  # type: ignore[no-redef]


class CodingEnv(EnvClient[CodeAction, CodeObservation, CodingState]):
    """`async with CodingEnv(url) as env: await env.step(CodeAction(code="print(1 + 1)"))`"""
