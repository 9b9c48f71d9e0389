"""One shared Docker SDK client per process, made on first use (the SDK is an optional extra)."""

from __future__ import annotations

import threading
from typing import Any

from openenv.errors import ProviderUnavailableError

__all__ = ["docker_client", "docker_errors"]

_lock = threading.Lock()
_client: Any = None
# Pools start dozens of containers at once, each from its own worker thread: the SDK's default
# of 10 pooled connections would make most of them wait (and warn) for a free one.
_POOL_SIZE = 128


def docker_client() -> Any:
    """The process's `docker.DockerClient` (from DOCKER_HOST or the local socket), pinged once.

    Raises:
        ProviderUnavailableError: the `docker` extra is not installed or no engine answers.
    """
    global _client
    with _lock:
        if _client is not None:
            return _client
        try:
            import docker
        except ImportError as exc:
            raise ProviderUnavailableError(
                "running containers needs the docker SDK: pip install 'openenv-hub[docker]'"
            ) from exc
        try:
            client = docker.from_env(max_pool_size=_POOL_SIZE)
            client.ping()
        except Exception as exc:  # DockerException, requests' errors: all mean "no engine here"
            raise ProviderUnavailableError(
                f"no Docker engine reachable ({exc}); start Docker, or set DOCKER_HOST"
            ) from exc
        _client = client
        return client


def docker_errors() -> Any:
    """The `docker.errors` module (import it only once a client exists)."""
    import docker.errors

    return docker.errors
