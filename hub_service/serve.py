"""Running the service: the API server, its pipeline workers, and the periodic duties (the
reconcile crawl, the health polls, image collection), which run in one process of all those that
serve the database: the holder of the lease (hub_service/leadership).

`openenv hub serve` calls `serve()`; with no configuration at all it keeps its SQLite database
under ~/.cache/openenv-hub, indexes this repository's `envs/`, and runs the pipeline on them.

The worker processes it starts die with it, even when it is killed outright (SIGKILL): the kernel
kills them when it goes (PR_SET_PDEATHSIG on Linux), and a watchdog in each checks its parent
elsewhere. Containers left by processes that died so are removed when the Hub starts and stops
and when a worker starts (`sandbox.reap_leftovers`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from hub_service.assembly import assemble
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer import source_for
from hub_service.indexer.service import IndexReport, index_source
from hub_service.leadership import Deposed, Fence, Leadership, run_duty
from hub_service.settings import HubSettings

__all__ = [
    "WorkerSupervisor",
    "collect",
    "index_all",
    "poll_health",
    "reconcile",
    "run_worker",
    "serve",
    "settings_env",
]

log = logging.getLogger("hub_service")
_GRACEFUL_S = 5  # how long a stopping service waits for open connections (website streams)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WORKER_ENTRY = "from hub_service.serve import run_worker; run_worker()"


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


def index_all(settings: HubSettings, fence: Fence | None = None) -> list[IndexReport]:
    """Index every configured source once (local folder, and the Hub when enabled); as a periodic
    duty, under its `fence`."""
    assemble(settings)  # the lifecycle's listeners are in place before a revision moves
    engine = _duty_engine(settings, fence)
    factory = sessionmaker_for(engine)
    reports = []
    kinds = (["local"] if settings.local_source else []) + (["hf"] if settings.hf_enabled else [])
    try:
        for kind in kinds:
            with _logged("indexing the %s source failed", kind):  # one failing source does not stop the other
                reports.append(
                    index_source(
                        factory,
                        source_for(settings, kind),
                        max_attempts=settings.job_max_attempts,
                        full_every_s=(settings.hf_full_crawl_every_s or None) if kind == "hf" else None,
                    )
                )
    finally:
        engine.dispose()
    return reports


def _duty_engine(settings: HubSettings, fence: Fence | None) -> Engine:
    """An engine of the Hub's database for one run of a duty: with a `fence`, nothing it writes
    commits once this process has lost the lease (hub_service/leadership/fence.py)."""
    engine = make_engine(settings.sqlalchemy_url)
    return fence.guard(engine) if fence is not None else engine


@contextlib.contextmanager
def _logged(failed: str, *args: Any) -> Iterator[None]:
    """Run the block; a failure other than `Deposed` is logged as `failed % args` and left to the
    duty's next round (the Hub may be down for now), so the service keeps serving."""
    try:
        yield
    except Deposed:
        raise
    except Exception:
        log.exception(failed, *args)


@contextlib.contextmanager
def _duty_round(settings: HubSettings, fence: Fence | None, failed: str) -> Iterator[Engine]:
    """A `_duty_engine` for one round of a duty, disposed after it; its failures are `_logged`."""
    engine = _duty_engine(settings, fence)
    try:
        with _logged(failed):
            yield engine
    finally:
        engine.dispose()


class WorkerSupervisor(threading.Thread):
    """Keeps N worker processes running (plus `task_workers` that run only tasks, so webhooks and
    pull-request comments never wait behind builds): a worker that dies is replaced (its job is
    reclaimed)."""

    def __init__(self, settings: HubSettings, count: int, task_workers: int = 0, log_file: Path | None = None) -> None:
        super().__init__(name="hub-workers", daemon=True)
        self.settings = settings
        self.log_file = log_file  # the workers' output goes there (the console is for people)
        self.count = count
        self.task_workers = task_workers
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()
        self._stopped = threading.Event()

    def _spawn(self, tasks_only: bool) -> subprocess.Popen[bytes]:
        env = {**os.environ, **settings_env(self.settings)}
        flags = ["--parent", str(os.getpid()), *(["--tasks-only"] if tasks_only else [])]
        if self.log_file is None:
            return subprocess.Popen([sys.executable, "-c", _WORKER_ENTRY, *flags], env=env)
        with self.log_file.open("ab") as log_file:  # the child keeps its own descriptor
            return subprocess.Popen(
                [sys.executable, "-c", _WORKER_ENTRY, *flags], env=env, stdout=log_file, stderr=subprocess.STDOUT
            )

    def run(self) -> None:
        kinds = [False] * self.count + [True] * self.task_workers
        self.procs = [self._spawn(tasks_only) for tasks_only in kinds]
        while not self.stopping.wait(1.0):
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    log.warning("worker pid %s exited with %s; starting another", proc.pid, proc.returncode)
                    self.procs[i] = self._spawn(kinds[i])
        # The kernel's parent-death signal fires when the *thread* that started a worker ends:
        # this thread outlives the workers' graceful stop.
        self._stopped.wait()

    def stop(self) -> None:
        self.stopping.set()
        try:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.terminate()
            deadline = time.monotonic() + 10
            for proc in self.procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        finally:
            self._stopped.set()


def run_worker() -> None:
    """The entry point of a worker process `serve` starts (`--parent PID [--tasks-only]`): it
    dies with its parent, then runs `hub_service.worker.main`."""
    args = sys.argv[1:]
    parent = int(args[args.index("--parent") + 1]) if "--parent" in args else os.getppid()
    _die_with_parent(parent)
    from hub_service.worker import main

    main()


def _die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when `parent` dies (Linux), and watch for it anyway."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
                log.warning(
                    "prctl(PR_SET_PDEATHSIG) failed (errno %s); only the watchdog stops this worker with its parent",
                    ctypes.get_errno(),
                )
        except (OSError, AttributeError):
            log.warning("no prctl here; only the watchdog stops this worker with its parent")
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        log.warning("the Hub service (pid %s) is gone; this worker stops", parent)
        os._exit(1)

    threading.Thread(target=watch, name="hub-parent-watchdog", daemon=True).start()


def reconcile(settings: HubSettings, fence: Fence | None = None) -> list[IndexReport]:
    """The periodic crawl that catches what webhooks missed: index every source (new, changed and
    gone Spaces), and sync every open pull request the bot follows."""
    reports = index_all(settings, fence)
    if settings.pr_bot:
        from hub_service.db import session_scope
        from hub_service.prbot.service import reconcile_open

        with (
            _duty_round(settings, fence, "queueing the pull-request reconcile failed") as engine,
            session_scope(sessionmaker_for(engine)) as session,
        ):
            reconcile_open(session)
    return reports


def poll_health(settings: HubSettings, fence: Fence | None = None) -> None:
    """One health poll of the indexed Spaces (one listing of their runtime)."""
    from hub_service.health.service import poll

    with _duty_round(settings, fence, "polling the health of Spaces failed") as engine:
        poll(sessionmaker_for(engine), source_for(settings, "hf"))


def collect(settings: HubSettings, fence: Fence | None = None) -> None:
    """One collection: expired locks purged, then the registry's images nothing keeps (as
    `registry_gc` says: planned and audited, or deleted)."""
    from hub_service.locks.service import purge_expired
    from hub_service.pipeline.registry_gc import collect_registry

    with _duty_round(settings, fence, "collecting images failed") as engine:
        factory = sessionmaker_for(engine)
        purged = purge_expired(factory)
        if purged:
            log.info("purged %s expired lock(s)", purged)
        if settings.registry and settings.registry_gc != "off":
            collect_registry(settings, factory, dry_run=settings.registry_gc == "dry_run", fence=fence)


class _Every(threading.Thread):
    """Calls `fn(settings, fence)` now and then every `every_s` seconds (once when every_s <= 0), in
    the leader only when there is a `leadership` (a duty waits while another process leads; `fence`
    is its term, None without leadership)."""

    def __init__(
        self, name: str, fn: Any, settings: HubSettings, every_s: float, leadership: Leadership | None = None
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.fn, self.settings, self.every_s, self.leadership = fn, settings, every_s, leadership
        self.duty = name.removeprefix("hub-")
        self.stopping = threading.Event()

    def run(self) -> None:
        while True:
            if self.leadership is not None and not self.leadership.wait_leading(self.stopping):
                return
            try:
                ran = run_duty(self.leadership, self.duty, lambda fence: self.fn(self.settings, fence))
            except Exception:  # the database failed around the run: the next round tries again
                log.exception("the %s duty failed", self.duty)
                ran = True
            if not ran:
                # Leadership lapsed between the wait and the start: wait for it again, soon.
                if self.stopping.wait(min(1.0, self.every_s if self.every_s > 0 else 1.0)):
                    return
                continue
            if self.every_s <= 0 or self.stopping.wait(self.every_s):
                return


def serve(
    settings: HubSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 7860,
    workers: int | None = None,
    reindex_every_s: float = 600.0,
    log_level: str = "info",
    on_ready: Any = None,
    log_file: Path | None = None,
) -> None:
    """Serve the API (and website) with background indexing and pipeline workers; blocks.

    With `log_file`, the workers write there and uvicorn logs through the root logger (which the
    caller pointed at that file: hub_service/console.py) rather than to the terminal."""
    import uvicorn

    from hub_service.app import create_app

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate(settings.sqlalchemy_url)
    _retry_waiting(settings)
    app = create_app(settings, run_migrations=False)
    count = settings.embedded_workers if workers is None else workers
    live = settings.webhook_secret is not None or settings.hf_enabled
    supervisor = WorkerSupervisor(settings, count, task_workers=1 if live and count else 0, log_file=log_file)
    # Any number of processes may serve one database: one of them, the lease holder, runs the duties.
    leader_engine = make_engine(settings.sqlalchemy_url)
    leadership = Leadership(leader_engine, lease_s=settings.leader_lease_s)
    leading = threading.Event()  # set: stop keeping the lease
    keeper = threading.Thread(target=leadership.keep, args=(leading,), name="hub-leadership", daemon=True)
    schedulers = [_Every("hub-reconcile", reconcile, settings, reindex_every_s, leadership)]
    if settings.hf_enabled and settings.health_poll_s > 0:
        schedulers.append(_Every("hub-health", poll_health, settings, settings.health_poll_s, leadership))
    if settings.collect_every_s > 0:
        schedulers.append(_Every("hub-collect", collect, settings, settings.collect_every_s, leadership))
    _reap(settings)  # a Hub killed outright, or its workers, left these
    if supervisor.count or supervisor.task_workers:
        supervisor.start()
    keeper.start()
    for thread in schedulers:
        thread.start()
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default action the
    # process would die right there, before the workers are stopped and reaped (they would linger
    # as orphans). A handler that exits normally lets the `finally` below run first.
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        # Client addresses come from X-Forwarded-For only behind a proxy we were told about;
        # otherwise anyone could claim any address and dodge the rate limits.
        # A visitor's open page keeps streams open: stopping waits for them a few seconds, not forever.
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            proxy_headers=settings.trust_forwarded_for,
            forwarded_allow_ips=settings.forwarded_allow_ips,
            timeout_graceful_shutdown=_GRACEFUL_S,
            log_config=None if log_file is not None else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        for thread in schedulers:
            thread.stopping.set()
        leading.set()  # hands the lease back: another process takes the duties over now
        keeper.join(10)
        leader_engine.dispose()
        supervisor.stop()
        _reap(settings)  # workers that had to be killed left their smoke containers
        from hub_service.firewall import release

        release()  # this process's firewall chain: the host is left as found
        if previous == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


def _retry_waiting(settings: HubSettings) -> None:
    """A (re)start may have fixed what revisions wait for (an engine, a base image): run them now."""
    from hub_service.queue.jobs import wake_waiting

    engine = make_engine(settings.sqlalchemy_url)
    try:
        woken = wake_waiting(sessionmaker_for(engine))
    finally:
        engine.dispose()
    if woken:
        log.info("%s revisions waiting for the infrastructure run again now", woken)


def _reap(settings: HubSettings) -> None:
    if settings.builder == "process":
        return  # this Hub starts no containers
    from hub_service.sandbox import reap_leftovers

    removed = reap_leftovers(settings)
    if removed:
        log.info("removed %s container(s) left by processes of this Hub that died", removed)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
