"""Finding, killing and reaping sandbox processes through /proc.

A killed sandbox leaves processes that take a moment to die, and orphans that the machine's init
must reap. In a container the server itself is init (pid 1), and asyncio reaps only the children
it started, so `reap_orphans` collects the rest; elsewhere init does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator

__all__ = ["kill_group", "kill_uid", "reap_orphans", "settle", "tasks_of_uid", "uids_in_use"]


def _stats() -> Iterator[tuple[int, str, int, int]]:
    """(pid, state, ppid, pgrp) of every process we can see."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
            fields = raw[raw.rfind(b")") + 2 :].split()
            with contextlib.suppress(IndexError, ValueError):
                yield int(name), fields[0].decode(), int(fields[1]), int(fields[2])


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def uids_in_use() -> set[int]:
    """The uids that own a process right now."""
    return {uid for pid, *_ in _stats() if (uid := _uid_of(pid)) is not None}


def tasks_of_uid(uid: int) -> int:
    """Threads and processes running as `uid` (RLIMIT_NPROC counts them all)."""
    total = 0
    for pid, *_ in _stats():
        if _uid_of(pid) == uid:
            with contextlib.suppress(OSError):
                total += len(os.listdir(f"/proc/{pid}/task"))
    return total


def _group_gone(pgid: int) -> bool:
    """Whether no process (zombies included) is left in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a member we may not signal: it exists
        return False
    return False


def kill_group(pgid: int) -> int:
    """SIGKILL the group; returns how many members it still had (zombies too: until reaped,
    they count against the sandbox's process limit)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    return sum(1 for _, _, _, pgrp in _stats() if pgrp == pgid)


def kill_uid(uid: int, spare: int | None = None) -> int:
    """SIGKILL every process of a sandbox uid except `spare`; returns how many there were
    (zombies included). Never touches the server's own uid."""
    if uid == os.getuid():
        return 0
    count = 0
    for pid, state, _, _ in _stats():
        if pid != spare and _uid_of(pid) == uid:
            count += 1
            if state != "Z":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
    return count


def reap_orphans(tracked: set[int]) -> int:
    """When this process is init, reap zombie children that asyncio does not track."""
    if os.getpid() != 1:
        return 0
    me, reaped = os.getpid(), 0
    for pid, state, ppid, _ in _stats():
        if state == "Z" and ppid == me and pid not in tracked:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
                reaped += 1
    return reaped


async def settle(
    pgid: int, uid: int | None, tracked: set[int], spare: int | None = None, timeout_s: float = 3.0
) -> bool:
    """Kill a sandbox's processes until none is left (they count against its process limit
    until they are gone). Returns False if some survived `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    if uid is None and _group_gone(pgid):  # the common case: nothing left, no /proc scan needed
        return True
    while True:
        left = kill_group(pgid)
        if uid is not None:
            left += kill_uid(uid, spare)
        reap_orphans(tracked)
        if not left:
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
