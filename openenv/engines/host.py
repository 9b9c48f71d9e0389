"""A running container as this machine's kernel holds it: its first process and its cgroup.

The Hub measures containers from what the container cannot shape: the kernel's records on the
engine's host. Those records are this machine's only when two things hold, and `view` checks both:
the engine runs here (`ContainerEngine.local`: reached through a unix socket), and the process the
engine names is in a cgroup that carries the container's id. So a container on an engine elsewhere,
one in another pid namespace, or one whose process is gone is never measured through some other
process of this machine that happens to have its pid: `HostView.unseen` says why, and the checks
that need it skip rather than pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cgroup", "HostView", "cgroup_of", "view"]

# A limit of 2**62 or more (v1) or "max" (v2) is no limit.
_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class Cgroup:
    """A container's cgroup on this host, read from the kernel (v1 or v2)."""

    folders: dict[str, Path]  # controller ("memory", "cpu", "pids", ...; "" for v2) -> its folder

    def _read(self, controller: str, v1: str, v2: str) -> str | None:
        folder = self.folders.get(controller)
        name = v1
        if folder is None:
            folder, name = self.folders.get(""), v2
        if folder is None:
            return None
        try:
            return (folder / name).read_text().strip()
        except OSError:
            return None

    def memory_limit(self) -> int | None:
        raw = self._read("memory", "memory.limit_in_bytes", "memory.max")
        return None if raw is None or raw == "max" or int(raw) >= _UNLIMITED else int(raw)

    def memory_peak(self) -> int | None:
        """The most memory the container held since it started (v2 kernels before 5.19: its usage now)."""
        raw = self._read("memory", "memory.max_usage_in_bytes", "memory.peak")
        if raw is None and "" in self.folders:
            raw = self._read("", "", "memory.current")
        return int(raw) if raw is not None else None

    def memory_in_use(self) -> int | None:
        """Its memory as `docker stats` shows it: usage less the inactive page cache."""
        raw = self._read("memory", "memory.usage_in_bytes", "memory.current")
        if raw is None:
            return None
        stat = self._read("memory", "memory.stat", "memory.stat") or ""
        rows = dict(row.split() for row in stat.splitlines() if row.count(" ") == 1)
        return int(raw) - int(rows.get("total_inactive_file", rows.get("inactive_file", 0)))

    def oom_kills(self) -> int:
        """How many of the container's processes the kernel killed for memory (the cgroup's own count)."""
        raw = self._read("memory", "memory.oom_control", "memory.events") or ""
        counts = dict(line.split() for line in raw.splitlines() if line.count(" ") == 1)
        return int(counts.get("oom_kill", 0))

    def cpu_limit(self) -> float | None:
        """The CPUs the container may use (quota over period), None when unlimited."""
        if "cpu" in self.folders:
            quota = int(self._read("cpu", "cpu.cfs_quota_us", "") or -1)
            period = int(self._read("cpu", "cpu.cfs_period_us", "") or 100_000)
        else:
            text = (self._read("", "", "cpu.max") or "max").split()
            if text[0] == "max":
                return None
            quota, period = int(text[0]), int(text[1]) if len(text) > 1 else 100_000
        return None if quota <= 0 else quota / period

    def cpu_seconds(self) -> float | None:
        raw = self._read("cpuacct", "cpuacct.usage", "")
        if raw is not None:
            return int(raw) / 1e9
        stat = self._read("", "", "cpu.stat") or ""
        usage = dict(line.split() for line in stat.splitlines() if line.count(" ") == 1).get("usage_usec")
        return int(usage) / 1e6 if usage is not None else None

    def pids_limit(self) -> int | None:
        raw = self._read("pids", "pids.max", "pids.max")
        return None if raw is None or raw == "max" else int(raw)

    def processes(self) -> list[int]:
        raw = self._read("pids", "cgroup.procs", "cgroup.procs") or ""
        return [int(p) for p in raw.split()]


def cgroup_of(container: str, pid: int) -> Cgroup | None:
    """The cgroup of this host's process `pid` when it is `container`'s (v1 or v2), else None
    (this host's `pid` is someone else, or no one)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    folders: dict[str, Path] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if container not in path:
            continue
        if controllers == "":
            folders[""] = Path(f"/sys/fs/cgroup{path}")
            continue
        for name in controllers.split(","):
            mount = Path("/sys/fs/cgroup") / controllers
            folders[name.removeprefix("name=")] = (mount if mount.is_dir() else Path("/sys/fs/cgroup") / name) / (
                path.lstrip("/")
            )
    return Cgroup(folders) if folders else None


@dataclass(frozen=True)
class HostView:
    """What this host's kernel shows of one container.

    Attributes:
        container: the container's full id.
        pid: its first process on this host (0 when unseen).
        cgroup: its cgroup here (None when unseen).
        unseen: why this host cannot see it (None when it can).
    """

    container: str
    pid: int = 0
    cgroup: Cgroup | None = None
    unseen: str | None = None

    @property
    def seen(self) -> bool:
        return self.unseen is None


def view(engine: Any, info: dict[str, Any]) -> HostView:
    """This host's view of the container `info` describes (the engine's `inspect` of it), on
    `engine` (a `ContainerEngine`)."""
    container = str(info.get("Id") or "")
    if not engine.local:
        return HostView(
            container,
            unseen=f"the {engine.where()} runs on another machine: its containers' processes are not this host's to read",
        )
    pid = int((info.get("State") or {}).get("Pid") or 0)
    if pid <= 0:
        return HostView(container, unseen="the engine gave no process id: the container is not running")
    cgroup = cgroup_of(container, pid) if container else None
    if cgroup is None:
        return HostView(
            container,
            unseen=f"process {pid} on this host is not the container's (another pid namespace, or it is gone)",
        )
    return HostView(container, pid, cgroup)
