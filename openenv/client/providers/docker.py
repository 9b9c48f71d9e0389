"""Deprecated: `DockerProvider` is `ContainerProvider` (openenv.client.providers.container), which
runs on whichever engine `openenv.engines` selects, Docker or Podman. The old name still works and
warns (DeprecationWarning); it goes in the next release (docs/providers.md, "Deprecated names").
"""

from __future__ import annotations

from typing import Any

from openenv._lazy import warn_renamed
from openenv.client.providers.container import ContainerProvider, ImageDigestError, container_name

__all__ = ["ImageDigestError", "container_name"]


def __getattr__(name: str) -> Any:
    if name == "DockerProvider":
        warn_renamed("DockerProvider", "ContainerProvider")
        return ContainerProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
