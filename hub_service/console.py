"""A console for people: what `openenv hub serve --log-file PATH` (and so `bash scripts/serve`) prints.

The full log (every logger at the chosen level, the workers' output too) goes to the file; the
terminal gets warnings and errors only, plus the lines written for a person: one line per env as
its verdict lands (`✓ local/echo_env passed in 14 s`, `✗ local/x failed at build: why`,
`… local/x waiting: why`) and a summary line with the URL once every env has one. Libraries that
talk a lot at INFO (picows per WebSocket, alembic per migration, httpx per request, gradio,
uvicorn's access log) are heard on the terminal only with `--verbose`.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.catalog.states import VersionState
from hub_service.db import make_engine, sessionmaker_for
from hub_service.queue.errors import WaitCode
from hub_service.settings import HubSettings

__all__ = ["Verdict", "VerdictWatcher", "setup_console_logging"]

_FORMAT = "%(asctime)s %(processName)s %(name)s %(levelname)s %(message)s"
_MAX_LINES = 200  # a catalog of thousands (the Hub source) is not listed line by line
_REASON_CHARS = 240


def setup_console_logging(log_file: Path, *, level: str, verbose: bool, stream: TextIO | None = None) -> None:
    """Every log record at `level` to `log_file`; to the terminal, warnings and errors only
    (everything at `level` with `verbose`)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    for handler in list(root.handlers):  # a basicConfig made earlier would print everything twice
        root.removeHandler(handler)
    root.setLevel(level.upper())
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(to_file)
    to_terminal = logging.StreamHandler(stream or sys.stderr)
    to_terminal.setLevel(level.upper() if verbose else logging.WARNING)
    to_terminal.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(to_terminal)
    logging.captureWarnings(True)


@dataclass(frozen=True)
class Verdict:
    """The latest main revision of one env, as the console reports it."""

    env: str  # owner/name
    state: str
    seconds: float | None
    stage: str | None  # where it failed; while it waits, the wait's code
    reason: str | None

    def line(self) -> str | None:
        if self.state == VersionState.PASSED:
            took = f" in {self.seconds:.0f} s" if self.seconds is not None else ""
            return f"✓ {self.env} passed{took}"
        if self.state == VersionState.FAILED:
            return f"✗ {self.env} failed at {self.stage or 'an unknown stage'}: {_short(self.reason)}"
        if self.state == VersionState.WAITING and self.stage == WaitCode.HOST_SETUP:
            return f"… {self.env} waits for this host's set-up (the operator's to fix; it runs once fixed): {_short(self.reason)}"
        if self.state == VersionState.WAITING:
            return f"… {self.env} waiting: {_short(self.reason)}"
        return None  # queued, running: no verdict yet


def _short(reason: str | None) -> str:
    text = " ".join((reason or "no reason recorded").split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


class VerdictWatcher(threading.Thread):
    """Reads the catalog every `poll_s` and prints each env's verdict once as it lands (again
    when it changes), then a summary line once every env has one (again when the counts change)."""

    def __init__(self, settings: HubSettings, url: str, out: Callable[[str], None], *, poll_s: float = 2.0) -> None:
        super().__init__(name="hub-console", daemon=True)
        self.settings, self.url, self.out, self.poll_s = settings, url, out, poll_s
        self.stopping = threading.Event()
        self._shown: dict[str, tuple[str, str | None]] = {}
        self._summary: tuple[int, int, int] | None = None
        self._lines = 0

    def run(self) -> None:
        engine = make_engine(self.settings.sqlalchemy_url)
        try:
            factory = sessionmaker_for(engine)
            while not self.stopping.wait(self.poll_s):
                try:
                    verdicts = self.read(factory)
                except Exception:  # not migrated yet, or the database restarts: next time
                    logging.getLogger("hub_service.console").debug("reading verdicts failed", exc_info=True)
                    continue
                for line in self.report(verdicts):
                    self.out(line)
        finally:
            engine.dispose()

    def read(self, factory: sessionmaker[Session]) -> list[Verdict]:
        """The verdict of each env's latest main revision (envs without one yet included, as queued)."""
        with factory() as session:
            latest = (
                select(EnvVersion.env_id, func.max(EnvVersion.id).label("id"))
                .where(EnvVersion.ref == "main")
                .group_by(EnvVersion.env_id)
                .subquery()
            )
            rows = session.execute(
                select(EnvRecord.owner, EnvRecord.name, EnvVersion)
                .join(latest, latest.c.env_id == EnvRecord.id)
                .join(EnvVersion, EnvVersion.id == latest.c.id)
                .where(EnvRecord.gone.is_(False))
                .order_by(EnvRecord.owner, EnvRecord.name)
            ).all()
            verdicts = []
            for owner, name, version in rows:
                seconds = None
                if version.state == VersionState.PASSED and version.finished_at is not None:
                    started = session.scalar(
                        select(func.min(StageRun.started_at)).where(
                            StageRun.version_id == version.id,
                            StageRun.attempt
                            == select(func.max(StageRun.attempt))
                            .where(StageRun.version_id == version.id)
                            .scalar_subquery(),
                        )
                    )
                    seconds = _between(started, version.finished_at)
                waiting = version.state == VersionState.WAITING
                reason = version.waiting_reason if waiting else version.failure_reason
                stage = version.waiting_code if waiting else version.failure_stage  # a wait's stage is its code
                verdicts.append(Verdict(f"{owner}/{name}", version.state, seconds, stage, reason))
            return verdicts

    def report(self, verdicts: list[Verdict]) -> list[str]:
        """The lines to print for this reading: new or changed verdicts, then the summary if due."""
        lines: list[str] = []
        for verdict in verdicts:
            key = (verdict.state, verdict.reason if verdict.state == VersionState.WAITING else None)
            line = verdict.line()
            if line is None or self._shown.get(verdict.env) == key:
                continue
            self._shown[verdict.env] = key
            self._lines += 1
            if self._lines <= _MAX_LINES:
                lines.append(line)
            elif self._lines == _MAX_LINES + 1:
                lines.append(f"… more verdicts than {_MAX_LINES}: see the catalog at {self.url}")
        states = [v.state for v in verdicts]
        settled = (VersionState.PASSED, VersionState.FAILED, VersionState.WAITING)
        if states and all(s in settled for s in states):
            counts = (states.count(VersionState.PASSED), states.count(VersionState.FAILED), states.count("waiting"))
            if counts != self._summary:
                self._summary = counts
                lines.append(_summary_line(counts, self.url))
        return lines


def _summary_line(counts: tuple[int, int, int], url: str) -> str:
    """`All 7 envs passed. The Hub is at URL …` or `7 envs checked: 5 passed, 1 failed, 1 waiting …`."""
    passed, failed, waiting = counts
    total = passed + failed + waiting
    if passed == total:
        said = f"All {total} envs passed" if total > 1 else "The env passed"
    else:
        parts = [f"{passed} passed", *([f"{failed} failed"] if failed else [])]
        parts += [f"{waiting} waiting for the infrastructure"] if waiting else []
        said = f"{total} envs checked: {', '.join(parts)}"
    return f"{said}. The Hub is at {url} (Ctrl-C stops it)"


def _between(start: dt.datetime | None, end: dt.datetime) -> float | None:
    if start is None:
        return None
    return max(0.0, (end - start).total_seconds())
