"""The typed client of the grid world."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import GridAction, GridObservation, GridState
except ImportError:  # run from the env's folder, not as a package
    from models import GridAction, GridObservation, GridState  # type: ignore[no-redef]


class GridWorldEnv(EnvClient[GridAction, GridObservation, GridState]):
    """`async with GridWorldEnv(url) as env: await env.step(GridAction(move="up"))`"""
