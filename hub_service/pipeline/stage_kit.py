"""What every stage works with: its log (`StageLog`), the switch that stops it from outside
(`Abort`), and what it raises when the env fails it (`StageFailed`, `ValidationFailed`)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Abort", "ChecksFailed", "StageFailed", "StageLog", "ValidationFailed", "plain"]

_MAX_LOG = 400_000  # characters kept per stage log (the first lines and the tail win)
_MAX_LINE = 1_000  # characters kept per line: the 200 server lines a smoke log takes fit, with room to spare
_KEEP_HEAD = 20  # lines at the start of a log (the Hub's own: what is built, from what) that are never dropped
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    """Text without terminal colour codes (build tools colour their errors)."""
    return _ANSI.sub("", text)


class StageFailed(Exception):
    """The environment failed this stage; `reason` is what users see."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ValidationFailed(StageFailed):
    """Validation failed; `report` is the report, and `rfc008` its RFC 008 report, kept even though
    the stage failed."""

    def __init__(self, reason: str, report: dict[str, Any], rfc008: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.report = report
        self.rfc008 = rfc008


class ChecksFailed(StageFailed):
    """The stage ran, and the RFC 008 checks it ran fail the revision (the setting `rfc008_gate`);
    `kept` is what the stage measured, written to the revision all the same."""

    def __init__(self, reason: str, kept: dict[str, Any]) -> None:
        super().__init__(reason)
        self.kept = kept


class StageLog:
    """Lines of one stage's log, with a time offset, capped in size.

    Each line is cut at `_MAX_LINE` characters (with a marker saying how much was cut), and when
    the log is over `_MAX_LOG` lines are dropped after its first `_KEEP_HEAD`: one huge line or a
    flood of output from a build or a server never pushes out the Hub's own lines.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.dropped = 0
        self.start = time.monotonic()
        self.closed = False

    def __call__(self, line: str) -> None:
        if self.closed:  # a stage stopped at its deadline may still be winding down
            return
        body = plain(line[: _MAX_LINE * 4]).rstrip()  # cut before the regex runs over a line of megabytes
        if len(line) > _MAX_LINE * 4 or len(body) > _MAX_LINE:
            cut = len(line) - _MAX_LINE if len(line) > _MAX_LINE * 4 else len(body) - _MAX_LINE
            body = f"{body[:_MAX_LINE]} [... {cut} more characters cut]"
        text = f"[{time.monotonic() - self.start:7.2f}s] {body}"
        self.lines.append(text)
        self.size += len(text) + 1
        while self.size > _MAX_LOG and len(self.lines) > _KEEP_HEAD + 1:
            self.size -= len(self.lines.pop(_KEEP_HEAD)) + 1
            self.dropped += 1

    def close(self) -> None:
        """Take no more lines (the runner has recorded the log)."""
        self.closed = True

    def text(self) -> str:
        if not self.dropped:
            return "\n".join(self.lines)
        head, tail = self.lines[:_KEEP_HEAD], self.lines[_KEEP_HEAD:]
        return "\n".join(
            [*head, f"[... {self.dropped} lines dropped: the log is capped at {_MAX_LOG} characters ...]", *tail]
        )


class Abort:
    """Stops a running stage from outside (the runner, when the stage's deadline passes): the stage
    registers what must stop with it (its server, its event loop), and `abort` stops all of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []
        self.fired = False

    def on_abort(self, hook: Callable[[], None]) -> None:
        """Call `hook` when the stage is aborted (at once if it already was)."""
        with self._lock:
            if not self.fired:
                self._hooks.append(hook)
                return
        hook()

    def abort(self) -> None:
        """Run every hook, the last registered first; a hook that fails is logged, the rest still run."""
        with self._lock:
            self.fired, hooks, self._hooks = True, self._hooks, []
        for hook in reversed(hooks):
            try:
                hook()
            except Exception:  # stopping is best-effort per hook; the others must still run
                logging.getLogger("hub_service.pipeline").warning(
                    "stopping an aborted stage: %r failed", hook, exc_info=True
                )
