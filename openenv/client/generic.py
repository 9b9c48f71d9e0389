"""`GenericEnvClient`: talk to any OpenEnv server with plain dicts, no model classes."""

from __future__ import annotations

from typing import Any

from openenv.client.base import EnvClient

__all__ = ["GenericEnvClient"]


class GenericEnvClient(EnvClient[dict[str, Any], dict[str, Any], dict[str, Any]]):
    """Actions are dicts (or models); observations and state come back as dicts.

    async with GenericEnvClient("http://127.0.0.1:8000") as env:
        result = await env.step({"message": "hi"})
        result.observation["echoed_message"]
    """
