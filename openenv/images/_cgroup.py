"""A memory limit for BuildKit's RUN steps. BuildKit takes no `--memory` (and the engine's
integrated BuildKit ignores `--cgroup-parent`): it runs every step under one cgroup of the engine,
`<engine parent>/buildkit` (`/docker/buildkit` with the cgroupfs driver). The limit is set on that
cgroup, so it caps the RUN steps of all BuildKit builds of this engine together, and it stays set
after the build (builds that ask for no limit leave it as it is: on a Hub's machine, the Hub's
limit holds). It needs root and a local engine; elsewhere the build runs without it and its log
says so."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["build_cgroup"]

_ROOT = Path("/sys/fs/cgroup")
_PARENT = ("docker", "buildkit")  # the engine's default cgroup parent (cgroupfs driver), then BuildKit's own


@contextlib.contextmanager
def build_cgroup(memory: int | None, emit: Callable[[str], None]) -> Iterator[None]:
    """Set `memory` (bytes) on the cgroup BuildKit's steps run under, for the build inside."""
    if memory:
        where = _limit(memory)
        if where is None:
            emit("note: the build's memory limit is not enforced here (it needs root and a local engine's cgroups)")
        else:
            emit(f"RUN steps are limited to {memory >> 20} MiB of memory ({where})")
    yield


def _limit(memory: int) -> str | None:
    """Write the limit; returns the cgroup written, or None when that is not possible here."""
    host = os.environ.get("DOCKER_HOST", "unix://")
    if os.geteuid() != 0 or not host.startswith("unix://"):
        return None
    try:
        v1 = _ROOT / "memory"
        if (v1 / "memory.limit_in_bytes").is_file():
            folder = v1.joinpath(*_PARENT)
            folder.mkdir(parents=True, exist_ok=True)
            swap = folder / "memory.memsw.limit_in_bytes"
            current = int((folder / "memory.limit_in_bytes").read_text())
            # memory+swap may never be below memory: lowering sets memory first, raising memory+swap first.
            order = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if memory < current else ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            for name in order:
                if name == "memory.memsw.limit_in_bytes" and not swap.exists():
                    continue
                (folder / name).write_text(str(memory))
            return str(folder.relative_to(v1))
        if (_ROOT / "cgroup.controllers").is_file() and "memory" in (_ROOT / "cgroup.controllers").read_text().split():
            folder = _ROOT.joinpath(*_PARENT)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "memory.max").write_text(str(memory))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            return str(folder.relative_to(_ROOT))
    except (OSError, ValueError):
        return None
    return None
