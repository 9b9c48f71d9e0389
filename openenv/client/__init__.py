"""Clients for OpenEnv servers: `EnvClient` (async), `SyncEnvClient`, `GenericEnvClient`."""

from __future__ import annotations

from openenv.client.base import EnvClient, SchemaMismatchError
from openenv.client.generic import GenericEnvClient
from openenv.client.sync import SyncEnvClient

__all__ = ["EnvClient", "GenericEnvClient", "SchemaMismatchError", "SyncEnvClient"]
