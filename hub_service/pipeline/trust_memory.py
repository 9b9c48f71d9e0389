"""What the capacity card reads beside the server's replies: the memory its server uses (a
container's usage through the Docker API, or the resident memory of a process and its children
from /proc), the image's size, and the session count its /health reports."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["health", "image_size_mb", "reader", "wait_sessions"]

_MB = float(1 << 20)
_HEALTH_MAX = 64 << 10  # bytes read of a /health reply


def image_size_mb(tag: str) -> float:
    from hub_service.pipeline.builders import image_size_mb as size

    return size(tag)


def reader(provider: Any) -> Callable[[], Awaitable[float | None]]:
    """An async function giving the server's memory in MB now (None when it cannot be read)."""
    container = getattr(provider, "container_id", None)
    proc = getattr(provider, "proc", None)
    seen: list[Any] = []  # this host's view of the container (`openenv.engines.host`), looked up once

    async def read() -> float | None:
        if container is not None:
            return await asyncio.to_thread(_container_mb, provider, container, seen)
        if proc is not None and getattr(proc, "pid", None):
            return await asyncio.to_thread(_tree_rss_mb, proc.pid)
        return None

    return read


def _container_mb(provider: Any, container: str, seen: list[Any]) -> float | None:
    """The container's memory as `docker stats` shows it: usage less the inactive page cache.

    Read from the container's cgroup when this host holds it (at once), else through the engine's
    API (whose figures wait for the engine's next sample, about a second)."""
    from openenv.engines.host import view

    client = provider.client
    if not seen:
        seen.append(view(provider.engine, client.api.inspect_container(container)))
    used = seen[0].cgroup.memory_in_use() if seen[0].cgroup is not None else None
    if used is not None:
        return round(used / _MB, 3)
    stats = client.api.stats(container, stream=False, one_shot=True)
    memory = stats.get("memory_stats") or {}
    usage = memory.get("usage")
    if not isinstance(usage, int):
        return None
    detail = memory.get("stats") or {}
    cache = detail.get("inactive_file", detail.get("total_inactive_file", 0))
    return round((usage - (cache if isinstance(cache, int) else 0)) / _MB, 3)


def _tree_rss_mb(root: int) -> float | None:
    """Resident memory of `root` and every process below it, summed."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            if pid == root:
                return None
            continue
        todo += children.get(pid, [])
    return round(total / _MB, 3)


async def health(url: str, timeout: float = 2.0) -> dict[str, Any]:
    """The server's /health reply as a dict ({} when it has none to give)."""

    def fetch() -> dict[str, Any]:
        try:
            with urllib.request.urlopen(url + "/health", timeout=timeout) as reply:
                data = json.loads(reply.read(_HEALTH_MAX))
        except Exception:  # an upstream server may have no such reply; the card does without it
            return {}
        return data if isinstance(data, dict) else {}

    return await asyncio.to_thread(fetch)


async def wait_sessions(url: str, ready: Callable[[int], bool], timeout: float = 2.0) -> None:
    """Wait (at most `timeout`) until /health's active_sessions satisfies `ready`; servers that do
    not report it are not waited for."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        active = (await health(url)).get("active_sessions")
        if not isinstance(active, int) or ready(active):
            return
        await asyncio.sleep(0.05)
