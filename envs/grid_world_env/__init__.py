"""grid_world_env: walk to the goal on a seeded grid of walls and pits, rendered as text."""

from .client import GridWorldEnv
from .models import GridAction, GridObservation, GridState

__all__ = ["GridAction", "GridObservation", "GridState", "GridWorldEnv"]
