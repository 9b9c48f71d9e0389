"""echo_env: the smallest OpenEnv environment; it echoes messages back."""

from .client import EchoEnv
from .models import EchoAction, EchoObservation, EchoState

__all__ = ["EchoAction", "EchoEnv", "EchoObservation", "EchoState"]
