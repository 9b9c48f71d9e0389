"""Serving environments: `create_app` and its settings. Needs the `server` extra."""

from __future__ import annotations

from openenv.server.app import create_app
from openenv.server.settings import ServerSettings, get_settings

__all__ = ["ServerSettings", "create_app", "get_settings"]
