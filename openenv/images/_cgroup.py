"""A memory limit (and a process limit) for BuildKit's RUN steps. BuildKit takes no `--memory` (and the engine's
integrated BuildKit ignores `--cgroup-parent`): it runs every step under one cgroup of the engine,
`<engine parent>/buildkit` (`/docker/buildkit` with the cgroupfs driver). The limit is set on that
cgroup, so it caps the RUN steps of all BuildKit builds of this engine together, and it stays set
after the build (builds that ask for no limit leave it as it is: on a Hub's machine, the Hub's
limit holds). It needs root and a local engine; elsewhere the build runs without it and its log
says so. The process limit (`pids.max`) is set on the same cgroup of the pids controller, with the
same reach."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["build_cgroup"]

_ROOT = Path("/sys/fs/cgroup")
_PARENT = ("docker", "buildkit")  # the engine's default cgroup parent (cgroupfs driver), then BuildKit's own


@contextlib.contextmanager
def build_cgroup(memory: int | None, emit: Callable[[str], None], pids: int | None = None) -> Iterator[None]:
    """Set `memory` (bytes) and `pids` (processes) on the cgroup BuildKit's steps run under, for
    the build inside."""
    limits = (
        ("process", pids, _limit_pids, f"{pids} processes"),
        ("memory", memory, _limit, f"{(memory or 0) >> 20} MiB of memory"),
    )
    for what, value, apply, amount in limits:
        if not value:
            continue
        where = apply(value)
        if where is None:
            emit(f"note: the build's {what} limit is not enforced here (it needs root and a local engine's cgroups)")
        else:
            emit(f"RUN steps are limited to {amount} ({where})")
    yield


def _local_root() -> bool:
    return os.geteuid() == 0 and os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")


def _limit_pids(pids: int) -> str | None:
    """Write the process limit; returns the cgroup written, or None when that is not possible here."""
    if not _local_root():
        return None
    for root in (_ROOT / "pids", _ROOT):  # cgroup v1's pids hierarchy, else the unified one
        controllers = root / "cgroup.controllers"
        if root == _ROOT and not (controllers.is_file() and "pids" in controllers.read_text().split()):
            continue
        if root != _ROOT and not (root / "cgroup.procs").is_file():
            continue
        try:
            folder = root.joinpath(*_PARENT)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "pids.max").write_text(str(pids))
        except OSError:
            return None
        return str(folder.relative_to(_ROOT))
    return None


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
            order = (
                ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
                if memory < current
                else ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            )
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
