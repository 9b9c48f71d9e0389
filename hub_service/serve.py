"""Running the service: the API server, its pipeline workers, and the periodic index.

`openenv hub serve` calls `serve()`; with no configuration at all it keeps its SQLite database
under ~/.cache/openenv-hub, indexes this repository's `envs/`, and runs the pipeline on them.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import IndexReport, index_source
from hub_service.pipeline.runner import source_for
from hub_service.settings import HubSettings

__all__ = ["WorkerSupervisor", "index_all", "serve", "settings_env"]

log = logging.getLogger("hub_service")


def settings_env(settings: HubSettings) -> dict[str, str]:
    """The settings as OPENENV_HUB_* variables, so child processes see what this one sees."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        secret = getattr(settings, name)
        if hasattr(secret, "get_secret_value"):
            value = secret.get_secret_value()
        env[f"OPENENV_HUB_{name.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def index_all(settings: HubSettings) -> list[IndexReport]:
    """Index every configured source once (local folder, and the Hub when enabled)."""
    factory = sessionmaker_for(make_engine(settings.sqlalchemy_url))
    reports = []
    kinds = (["local"] if settings.local_source else []) + (["hf"] if settings.hf_enabled else [])
    for kind in kinds:
        try:
            reports.append(index_source(factory, source_for(settings, kind), max_attempts=settings.job_max_attempts))
        except Exception:  # one source failing must not stop the other, nor the service
            log.exception("indexing the %s source failed", kind)
    return reports


class WorkerSupervisor(threading.Thread):
    """Keeps N worker processes running: a worker that dies is replaced (its job is reclaimed)."""

    def __init__(self, settings: HubSettings, count: int) -> None:
        super().__init__(name="hub-workers", daemon=True)
        self.settings = settings
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, **settings_env(self.settings)}
        return subprocess.Popen([sys.executable, "-m", "hub_service.pipeline.worker"], env=env)

    def run(self) -> None:
        self.procs = [self._spawn() for _ in range(self.count)]
        while not self.stopping.wait(1.0):
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    log.warning("worker pid %s exited with %s; starting another", proc.pid, proc.returncode)
                    self.procs[i] = self._spawn()

    def stop(self) -> None:
        self.stopping.set()
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


class _Reindexer(threading.Thread):
    def __init__(self, settings: HubSettings, every_s: float) -> None:
        super().__init__(name="hub-reindex", daemon=True)
        self.settings, self.every_s = settings, every_s
        self.stopping = threading.Event()

    def run(self) -> None:
        while True:
            index_all(self.settings)
            if self.every_s <= 0 or self.stopping.wait(self.every_s):
                return


def serve(settings: HubSettings, *, host: str = "127.0.0.1", port: int = 7860, workers: int | None = None,
          reindex_every_s: float = 600.0, log_level: str = "info", on_ready: Any = None) -> None:
    """Serve the API (and website) with background indexing and pipeline workers; blocks."""
    import uvicorn

    from hub_service.app import create_app

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate(settings.sqlalchemy_url)
    app = create_app(settings, run_migrations=False)
    supervisor = WorkerSupervisor(settings, settings.embedded_workers if workers is None else workers)
    reindexer = _Reindexer(settings, reindex_every_s)
    if supervisor.count:
        supervisor.start()
    reindexer.start()
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default action the
    # process would die right there, before the workers are stopped and reaped (they would linger
    # as orphans). A handler that exits normally lets the `finally` below run first.
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        # Client addresses come from X-Forwarded-For only behind a proxy we were told about;
        # otherwise anyone could claim any address and dodge the rate limits.
        uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=settings.trust_forwarded_for,
                    forwarded_allow_ips=settings.forwarded_allow_ips)
    finally:
        reindexer.stopping.set()
        supervisor.stop()
        if previous == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
