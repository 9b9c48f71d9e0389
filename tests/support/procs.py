"""Reading processes from /proc, for tests that kill and restart things."""

from __future__ import annotations

from pathlib import Path

__all__ = ["running"]


def running(pid: int) -> bool:
    """True while `pid` runs: a zombie (exited, not yet reaped by its parent) or a dead process counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")
