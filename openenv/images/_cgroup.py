"""A memory limit (and a process limit) for BuildKit's RUN steps. BuildKit takes no `--memory` (and the engine's
integrated BuildKit ignores `--cgroup-parent`): it runs every step under one cgroup of the engine,
`<engine parent>/buildkit` (`/docker/buildkit` with the cgroupfs driver). The limit is set on that
cgroup, so it caps the RUN steps of all BuildKit builds of this engine together while they run. It
needs root and a local engine; elsewhere the build runs without it and its log says so. The process
limit (`pids.max`) is set on the same cgroup of the pids controller, with the same reach.

The host is left as found: the values there before are put back when the last build that set limits
ends, even when it fails or is interrupted. Builds of several processes may overlap, so the values
found first are kept in a small state file (`/run/openenv-buildkit-limits.json`) that every such
build holds a shared lock on while it runs; the one that ends last (or `restore_leftover_limits`,
after a build was killed outright) writes them back and removes the file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["build_cgroup", "restore_leftover_limits"]

log = logging.getLogger("openenv.images")

_ROOT = Path("/sys/fs/cgroup")
_PARENT = ("docker", "buildkit")  # the engine's default cgroup parent (cgroupfs driver), then BuildKit's own
_STATE = Path("/run/openenv-buildkit-limits.json")
# Every file a limit below may write (cgroup v1 memory and pids hierarchies, then the unified one).
_FILES = (
    ("memory", "memory.limit_in_bytes"),
    ("memory", "memory.memsw.limit_in_bytes"),
    ("pids", "pids.max"),
    ("", "memory.max"),
    ("", "memory.swap.max"),
    ("", "pids.max"),
)


@contextlib.contextmanager
def build_cgroup(memory: int | None, emit: Callable[[str], None], pids: int | None = None) -> Iterator[None]:
    """Set `memory` (bytes) and `pids` (processes) on the cgroup BuildKit's steps run under, for
    the build inside; the values found before are back when the last overlapping build ends."""
    held = _hold() if (memory or pids) and _local_root() else None
    try:
        limits = (
            ("process", pids, _limit_pids, f"{pids} processes"),
            ("memory", memory, _limit, f"{(memory or 0) >> 20} MiB of memory"),
        )
        for what, value, apply, amount in limits:
            if not value:
                continue
            where = apply(value)
            if where is None:
                emit(
                    f"note: the build's {what} limit is not enforced here (it needs root and a local engine's cgroups)"
                )
            else:
                emit(f"RUN steps are limited to {amount} ({where})")
        yield
    finally:
        if held is not None:
            _release(held)


def restore_leftover_limits() -> bool:
    """Put back the values a build killed outright left set, when no build holds them now;
    returns whether anything was put back."""
    if not _local_root() or not _STATE.exists():
        return False
    with _meta_lock():
        try:
            fd = os.open(_STATE, os.O_RDWR)
        except FileNotFoundError:
            return False
        return _restore_if_last(fd)


@contextlib.contextmanager
def _meta_lock() -> Iterator[None]:
    # Taking a hold and checking for the last one are serialised (the cgroup root is a folder every
    # such host has, and nothing else locks it).
    fd = os.open(_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _hold() -> int | None:
    """Record the values found (unless an overlapping or killed build already did) and hold them
    with a shared lock; returns the state file's descriptor, or None when it cannot be kept."""
    try:
        with _meta_lock():
            fd = os.open(_STATE, os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(fd).st_size == 0:
                os.write(fd, json.dumps(_snapshot()).encode())
            fcntl.flock(fd, fcntl.LOCK_SH)
            return fd
    except OSError as exc:
        log.warning("cannot record the build cgroup's values to put them back afterwards: %s", exc)
        return None


def _release(fd: int) -> None:
    try:
        with _meta_lock():
            fcntl.flock(fd, fcntl.LOCK_UN)
            _restore_if_last(fd)
    finally:
        os.close(fd)


def _restore_if_last(fd: int) -> bool:
    """Under the meta lock: when no build holds the state, write its values back and remove it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # another build still runs under the limits; the last one restores
    try:
        found = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
        _put_back(found.get("values", {}), found.get("created", []))
        _STATE.unlink(missing_ok=True)
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _snapshot() -> dict[str, object]:
    values: dict[str, str] = {}
    created: list[str] = []
    for controller, name in _FILES:
        folder = (_ROOT / controller if controller else _ROOT).joinpath(*_PARENT)
        path = folder / name
        if path.is_file():
            values[str(path)] = path.read_text().strip()
        elif folder.parent.is_dir() and not folder.exists() and str(folder) not in created:
            created.append(str(folder))  # a limit below may make it: removed again afterwards
    return {"values": values, "created": created}


def _put_back(values: dict[str, str], created: list[str]) -> None:
    paths = {Path(p): v for p, v in values.items()}
    memory = next((p for p in paths if p.name == "memory.limit_in_bytes"), None)
    order = list(paths)
    if memory is not None and memory.is_file():
        # cgroup v1: memory+swap may never be below memory, so raising memory writes memory+swap first.
        swap = memory.with_name("memory.memsw.limit_in_bytes")
        raising = int(paths[memory]) >= int(memory.read_text())
        first, second = (swap, memory) if raising else (memory, swap)
        order = [p for p in (first, second) if p in paths] + [p for p in paths if p not in (memory, swap)]
    for path in order:
        try:
            path.write_text(paths[path])
        except OSError as exc:
            log.warning("could not put back %s=%s after a build: %s", path, paths[path], exc)
    for folder in created:
        with contextlib.suppress(OSError):  # only if empty: BuildKit's own step cgroups are its business
            Path(folder).rmdir()


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
