"""echo_env: the smallest OpenEnv environment; it echoes messages back (also as MCP tools)."""

from openenv import CallToolAction, CallToolObservation, ListToolsAction, ListToolsObservation

from .client import EchoEnv
from .models import EchoAction, EchoObservation, EchoState

__all__ = [
    "CallToolAction",
    "CallToolObservation",
    "EchoAction",
    "EchoEnv",
    "EchoObservation",
    "EchoState",
    "ListToolsAction",
    "ListToolsObservation",
]
