"""Removing the images a test built, by their tags: never by image id.

Parallel workers build the same envs (tests/support/parallel.py): their images have one id and
different tags. Removing by id would take the other workers' tags with it, or fail on their
running containers; removing a tag only untags while another tag still names the image.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["remove_tagged"]


def remove_tagged(client: Any, prefix: str) -> None:
    """Remove every tag under `prefix/` (the repository names a test's images share)."""
    import docker

    for image in client.images.list(name=f"{prefix}/*"):
        for tag in image.tags:
            if tag.startswith(f"{prefix}/"):
                with contextlib.suppress(docker.errors.NotFound):
                    client.images.remove(tag, force=True)
