"""A memory limit (and a process limit) for BuildKit's RUN steps. BuildKit takes no `--memory` (and the engine's
integrated BuildKit ignores `--cgroup-parent`): it runs every step under one cgroup of the engine,
`<engine parent>/buildkit` (`/docker/buildkit` with the cgroupfs driver). The limit is set on that
cgroup, so it caps the RUN steps of all BuildKit builds of this engine together while they run. It
needs root and an engine on this machine (`ContainerEngine.local`); elsewhere the build runs without
it and its log says so. The process
limit (`pids.max`) is set on the same cgroup of the pids controller, with the same reach.

The host is left as found: the values there before are put back when the last build that set limits
ends, even when it fails or is interrupted. Builds of several processes may overlap, so the values
found first are kept in a small state file (`/run/openenv-buildkit-limits.json`) that every such
build holds a shared lock on while it runs; the one that ends last (or `restore_leftover_limits`,
after a build was killed outright) writes them back and removes the file.

The classic builder takes the process limit on a cgroup of the build's own (`classic_cgroup`): the
engine puts its RUN steps' containers under the `cgroupparent` the build names. Either way,
`ProcessCap` says afterwards whether a step reached the cap (from the kernel's counters, never from
what the step printed), so that the build's log can name the refusal."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["ProcessCap", "build_cgroup", "classic_cgroup", "restore_leftover_limits", "step_cgroup"]

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


class ProcessCap:
    """Whether the RUN steps under a cgroup reached its process limit `cap` while a build ran: the
    kernel's count of forks refused there (cgroup v2 counts them on the cgroup whose limit refused),
    or its high-water mark reaching the cap; where that mark was at the cap already (an earlier or
    overlapping build's), the count seen at the cap while this build runs."""

    def __init__(self, folder: Path, cap: int) -> None:
        self.folder, self.cap = folder, cap
        self._refused = _number(folder / "pids.events")
        peak = _number(folder / "pids.peak")
        self._peak = peak if peak is not None and peak < cap else None
        self._seen = threading.Event()
        self._done = threading.Event()
        if self._peak is None:
            threading.Thread(target=self._watch, name="build-pids", daemon=True).start()

    def _watch(self) -> None:
        # A step refused a fork exits soon after (its processes go with it): a short look each time.
        while not self._done.wait(0.01):
            current = _number(self.folder / "pids.current")
            if current is not None and current >= self.cap:
                self._seen.set()
                return

    def hit(self) -> bool:
        """Whether a step was at the cap (a fork there is refused) since the build began."""
        refused, peak = _number(self.folder / "pids.events"), _number(self.folder / "pids.peak")
        return (
            self._seen.is_set()
            or (refused is not None and self._refused is not None and refused > self._refused)
            or (peak is not None and self._peak is not None and peak >= self.cap)
        )

    def close(self) -> None:
        self._done.set()


def _number(path: Path) -> int | None:
    """The number in a cgroup file ("max 3" in pids.events), or None (no such file, or "max")."""
    try:
        words = path.read_text().split()
    except OSError:
        return None
    return int(words[-1]) if words and words[-1].isdigit() else None


@contextlib.contextmanager
def step_cgroup(
    client: Any, buildkit: bool, memory: int | None, pids: int | None, emit: Callable[[str], None]
) -> Iterator[tuple[str | None, ProcessCap | None]]:
    """The limits of a build's RUN steps: with BuildKit, memory and processes on its one cgroup
    (`build_cgroup`); with the classic builder, processes on a cgroup of the build's own
    (`classic_cgroup`; its memory limit is the engine's, per step). Yields the cgroup parent the
    build names (the classic builder's) and what tells whether a step reached the process limit.
    Limits are set only where the engine `client` reaches runs on this machine."""
    from openenv.engines import engine_of

    local = engine_of(client).local
    if buildkit:
        with build_cgroup(memory, emit, pids=pids, local=local) as cap:
            yield None, cap
        return
    driver = ""
    if pids:
        try:
            driver = str(client.info().get("CgroupDriver") or "")
        except Exception as exc:  # the build itself fails with a clearer message when the engine is gone
            log.warning("cannot ask the engine for its cgroup driver: %s", exc)
    with classic_cgroup(pids, emit, driver, local=local) as found:
        yield found


@contextlib.contextmanager
def build_cgroup(
    memory: int | None, emit: Callable[[str], None], pids: int | None = None, *, local: bool = True
) -> Iterator[ProcessCap | None]:
    """Set `memory` (bytes) and `pids` (processes) on the cgroup BuildKit's steps run under, for
    the build inside, when the engine is on this machine (`local`); the values found before are
    back when the last overlapping build ends. Yields what tells whether a step reached the
    process limit (None: none set here)."""
    here = local and _root()
    held = _hold(renew_pids=bool(pids)) if (memory or pids) and here else None
    cap: ProcessCap | None = None
    try:
        if pids:
            where = _limit_pids(pids) if here else None
            _said("process", where, f"{pids} processes", emit)
            cap = ProcessCap(_ROOT / where, pids) if where is not None else None
        if memory:
            _said("memory", _limit(memory) if here else None, f"{memory >> 20} MiB of memory", emit)
        yield cap
    finally:
        if cap is not None:
            cap.close()
        if held is not None:
            _release(held)


def _said(what: str, where: str | None, amount: str, emit: Callable[[str], None]) -> None:
    if where is None:
        emit(
            f"note: the build's {what} limit is not enforced here (it needs root and the cgroups of an engine on "
            "this machine)"
        )
    else:
        emit(f"RUN steps are limited to {amount} ({where})")


@contextlib.contextmanager
def classic_cgroup(
    pids: int | None, emit: Callable[[str], None], driver: str, *, local: bool = True
) -> Iterator[tuple[str | None, ProcessCap | None]]:
    """A cgroup of this build's own, limited to `pids` processes, for the classic builder's RUN
    steps (the engine's `cgroupparent`, with its `cgroupfs` cgroup `driver`); yields the parent to
    name and what tells whether a step reached the limit, or (None, None) where it cannot be set.
    The cgroup is removed afterwards, from every hierarchy the engine made it in."""
    if not pids:
        yield None, None
        return
    name = f"openenv-build-{uuid.uuid4().hex[:12]}"
    folder = _pids_root()
    if driver != "cgroupfs" or not (local and _root()) or folder is None:
        emit(
            "note: the build's process limit is not enforced here (it needs root, the cgroups of an engine on "
            "this machine and its cgroupfs driver)"
        )
        yield None, None
        return
    folder = folder / name
    try:
        folder.mkdir()
        (folder / "pids.max").write_text(str(pids))
    except OSError as exc:
        emit(f"note: the build's process limit is not enforced here (cannot make its cgroup: {exc})")
        with contextlib.suppress(OSError):
            folder.rmdir()
        yield None, None
        return
    emit(f"RUN steps are limited to {pids} processes ({folder.relative_to(_ROOT)})")
    cap = ProcessCap(folder, pids)
    try:
        yield f"/{name}", cap
    finally:
        cap.close()
        _remove_everywhere(name)


def _pids_root() -> Path | None:
    """Where the pids controller's cgroups are made: cgroup v1's pids hierarchy, else the unified one."""
    if (_ROOT / "pids" / "cgroup.procs").is_file():
        return _ROOT / "pids"
    controllers = _ROOT / "cgroup.controllers"
    if controllers.is_file() and "pids" in (_ROOT / "cgroup.subtree_control").read_text().split():
        return _ROOT
    return None


def _remove_everywhere(name: str) -> None:
    """Remove the cgroup `name` under the root of every hierarchy (the engine makes it in each),
    waiting a little for the last step's container to be gone."""
    import time

    folders = [f for f in (_ROOT / name, *(h / name for h in _ROOT.iterdir() if h.is_dir())) if f.is_dir()]
    ends = time.monotonic() + 10
    while folders:
        for folder in list(folders):
            with contextlib.suppress(FileNotFoundError):
                try:
                    folder.rmdir()
                except OSError:
                    continue
            folders.remove(folder)
        if folders and time.monotonic() > ends:
            log.warning("could not remove the build's cgroups %s (still in use)", ", ".join(map(str, folders)))
            return
        if folders:
            time.sleep(0.2)


def restore_leftover_limits() -> bool:
    """Put back the values a build killed outright left set, when no build holds them now;
    returns whether anything was put back."""
    if not _root() or not _STATE.exists():
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


def _hold(renew_pids: bool = False) -> int | None:
    """Record the values found (unless an overlapping or killed build already did) and hold them
    with a shared lock; returns the state file's descriptor, or None when it cannot be kept.
    `renew_pids`: when no other build holds them, cgroup v1's pids cgroup is made anew (if BuildKit
    has no step in it), so that its high-water mark (`ProcessCap`) starts from this build."""
    try:
        with _meta_lock():
            fd = os.open(_STATE, os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(fd).st_size == 0:
                os.write(fd, json.dumps(_snapshot()).encode())
                if renew_pids:
                    folder = (_ROOT / "pids").joinpath(*_PARENT)
                    _clear_dead_steps(folder)
                    with contextlib.suppress(OSError):  # busy, or none: kept as it is (put back afterwards)
                        folder.rmdir()
            fcntl.flock(fd, fcntl.LOCK_SH)
            return fd
    except OSError as exc:
        log.warning("cannot record the build cgroup's values to put them back afterwards: %s", exc)
        return None


_DEAD_STEP_AGE_S = 30.0


def _clear_dead_steps(folder: Path) -> None:
    """Remove the step cgroups under `folder` that have had no process for a while: an engine
    stopped mid-step leaves its step's cgroup behind, and while it is there the pids cgroup cannot
    be made anew (so `ProcessCap` would see an old high-water mark). A live step's cgroup holds its
    process from the moment it is made; one without, older than _DEAD_STEP_AGE_S, is dead."""
    import time

    try:
        children = [c for c in folder.iterdir() if c.is_dir()]
    except OSError:
        return
    for child in children:
        with contextlib.suppress(OSError):  # a step that has a process (or is going) is left alone
            if (
                time.time() - child.stat().st_mtime > _DEAD_STEP_AGE_S
                and not (child / "cgroup.procs").read_text().strip()
            ):
                child.rmdir()
                log.info("removed a dead build step's cgroup %s (left by an engine stopped mid-step)", child)


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


def _root() -> bool:
    return os.geteuid() == 0


def _limit_pids(pids: int) -> str | None:
    """Write the process limit; returns the cgroup written, or None when that is not possible here."""
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
