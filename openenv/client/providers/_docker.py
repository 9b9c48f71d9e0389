"""The process's client of the container engine (`openenv.engines`: Docker unless
OPENENV_CONTAINER_ENGINE says otherwise), made on first use (the SDK is an optional extra)."""

from __future__ import annotations

from typing import Any

__all__ = ["docker_client", "docker_errors"]


def docker_client() -> Any:
    """The selected engine's shared `docker.DockerClient` (it speaks the Docker API), pinged once.

    Raises:
        ProviderUnavailableError: the `docker` extra is not installed or no engine answers.
    """
    from openenv.engines import engine

    return engine().client()


def docker_errors() -> Any:
    """The `docker.errors` module (import it only once a client exists)."""
    import docker.errors

    return docker.errors
