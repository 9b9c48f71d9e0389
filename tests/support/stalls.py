"""What a test prints when a request to an in-process server stalls: every thread's stack (the
server's among them) and, on PostgreSQL, what each connection to the database is doing or waiting
on. For failures seen only under CI's load, where the next run will not show them again."""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any

from sqlalchemy import text

__all__ = ["stall_report"]


def stall_report(factory: Any | None = None) -> str:
    """Thread stacks, and pg_stat_activity of the factory's database (when it is PostgreSQL)."""
    parts = []
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame)[-8:])
        parts.append(f"--- thread {names.get(ident, ident)}\n{stack}")
    if factory is not None:
        try:
            with factory() as s:
                if s.get_bind().dialect.name == "postgresql":
                    rows = s.execute(
                        text(
                            "SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS open_for, "
                            "left(query, 200) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND pid <> pg_backend_pid()"
                        )
                    ).all()
                    parts.append("--- database connections\n" + "\n".join(str(tuple(r)) for r in rows))
        except Exception as exc:  # the report must not hide the failure it explains
            parts.append(f"--- database connections: not read ({exc})")
    return "\n".join(parts)
