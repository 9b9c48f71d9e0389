"""Serving environments: `create_app` and its settings. Needs the `server` extra."""

from __future__ import annotations

from openenv.server.app import create_app
from openenv.server.run import serve_in_thread
from openenv.server.settings import ServerSettings, get_settings

__all__ = ["ServerSettings", "create_app", "get_settings", "serve_in_thread"]
