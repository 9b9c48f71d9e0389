"""coding_env: run Python code an agent writes, in a sandbox it cannot escape."""

from .client import CodingEnv
from .models import CodeAction, CodeObservation, CodingState

__all__ = ["CodeAction", "CodeObservation", "CodingEnv", "CodingState"]
