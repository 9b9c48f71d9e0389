"""What `openenv.engines` reads from the process environment (the only place it does).

| variable | default | meaning |
|---|---|---|
| OPENENV_CONTAINER_ENGINE | `docker` | the engine every part talks to: `docker` or `podman` |
| DOCKER_HOST | the local socket | the Docker engine (read by the docker SDK itself) |
| CONTAINER_HOST | `unix:///run/podman/podman.sock` | Podman's API service (`podman system service`), as podman's own tools read it |
"""

from __future__ import annotations

import os

__all__ = ["docker_host", "engine_kind", "podman_host"]


def engine_kind() -> str:
    """The engine asked for (OPENENV_CONTAINER_ENGINE), lower-cased; "docker" when unset."""
    return os.environ.get("OPENENV_CONTAINER_ENGINE", "").strip().lower() or "docker"


def podman_host() -> str:
    """Where Podman's API service listens (CONTAINER_HOST)."""
    return os.environ.get("CONTAINER_HOST", "").strip() or "unix:///run/podman/podman.sock"


def docker_host() -> str | None:
    """Where the Docker engine listens (DOCKER_HOST), or None: the SDK's default socket."""
    return os.environ.get("DOCKER_HOST", "").strip() or None
