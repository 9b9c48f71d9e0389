"""A worker: reclaim stale jobs, claim the next, run it; repeat until stopped. It runs every kind of
job (pipeline runs through `pipeline.runner`, tasks through the handlers `assembly` wires), so it
sits at the top of the Hub beside the assembly, above everything it runs.

Run several (`openenv hub worker`, or the ones `openenv hub serve` starts): they never take the
same job, and the job of a worker that dies is taken up again once its heartbeat is stale.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.assembly import assemble
from hub_service.catalog.models import EnvVersion
from hub_service.catalog.states import BuilderKind, VersionState
from hub_service.db import make_engine, sessionmaker_for
from hub_service.pipeline.runner import JobRunner
from hub_service.queue import jobs
from hub_service.queue.errors import Transient, WaitCode
from hub_service.queue.kinds import JobKind
from hub_service.queue.tasks import Handler, run_task
from hub_service.settings import HubSettings

__all__ = ["TASK_KINDS", "Worker", "main"]

TASK_KINDS = tuple(k for k in JobKind if k != JobKind.PIPELINE)

log = logging.getLogger("hub_service.worker")


class Worker:
    """Runs jobs; `kinds` limits it to some job kinds (e.g. TASK_KINDS: a worker that keeps
    webhooks and pull-request comments moving while others build).

    `tasks` maps each task kind to its handler; by default the Hub's assembly
    (`hub_service.assembly.assemble`) registers them, and the lifecycle's listeners with them.
    """

    def __init__(
        self,
        settings: HubSettings,
        factory: sessionmaker[Session] | None = None,
        worker_id: str | None = None,
        kinds: tuple[str, ...] | None = None,
        tasks: Mapping[str, Handler] | None = None,
    ) -> None:
        self.tasks = assemble(settings) if tasks is None else tasks
        self.settings = settings
        self.kinds = kinds
        self.factory = factory or sessionmaker_for(make_engine(settings.sqlalchemy_url))
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.runner = JobRunner(settings, self.factory, self.worker_id)
        self.stopping = threading.Event()
        self._probed_at = float("-inf")
        self._engine_seen: str | object | None = _UNSEEN  # the engine's epoch at the last look ("" no epoch, None down)
        self._host_ok: bool | None = None  # the host's set-up check at the last look

    def run_once(self) -> str | None:
        """Reclaim stale jobs, then run one job if there is one; returns its outcome or None."""
        for job_id, state in jobs.reclaim_stale(self.factory, self.settings.job_stale_after_s):
            log.warning("job %s had a dead worker; now %s", job_id, state)
        claim = jobs.claim(self.factory, self.worker_id, self.kinds)
        if claim is None:
            self._wake_if_engine_back()
            return None
        log.info("worker %s runs %s job %s (attempt %s)", self.worker_id, claim.kind, claim.job_id, claim.attempt)
        if claim.kind != JobKind.PIPELINE:
            return run_task(self.tasks, self.settings, self.factory, self.worker_id, claim)
        return self.runner.run(claim)

    def _wake_if_engine_back(self) -> None:
        """While idle, now and then: run the revisions that wait for the infrastructure now, rather
        than at the end of their backoff, when this worker sees evidence their cause changed: the
        engine answers after it did not, or restarted (its epoch) between two looks (`no_engine`,
        `engine_lost`); the host's set-up check passes after it failed, or for the first time in
        this worker (`host_setup`: a worker starts with the operator's current settings). An engine
        that merely goes on answering is no evidence: the backoff runs its course (a wake resets it)."""
        if self.kinds is not None and JobKind.PIPELINE not in self.kinds:
            return
        now = time.monotonic()
        if now - self._probed_at < self.settings.infra_probe_s:
            return
        self._probed_at = now
        with self.factory() as session:
            codes = set(
                session.scalars(
                    select(EnvVersion.waiting_code)
                    .where(
                        EnvVersion.state == VersionState.WAITING,
                        EnvVersion.waiting_code.in_(sorted({*Transient.ENGINE, WaitCode.HOST_SETUP})),
                    )
                    .distinct()
                )
            )
        if not codes:
            return
        client, seen = _engine_now()
        before, self._engine_seen = self._engine_seen, seen
        if codes & Transient.ENGINE and seen is not None and before is not _UNSEEN and before != seen:
            woken = jobs.wake_waiting(self.factory, Transient.ENGINE)
            if woken:
                log.info("the container engine answers anew: %s revisions waiting for it run now", woken)
        if WaitCode.HOST_SETUP in codes and client is not None:
            ok = _host_set_up(client, self.settings)
            was, self._host_ok = self._host_ok, ok
            if ok and was is not True:
                woken = jobs.wake_waiting(self.factory, {WaitCode.HOST_SETUP})
                if woken:
                    log.info("the host's set-up check passes: %s revisions waiting for it run now", woken)

    def run_until_idle(self, max_wait_s: float = 120.0) -> list[str]:
        """Run jobs until the queue is empty (tests, `openenv hub index --wait`); waits for jobs
        that are queued but not due yet (retries, deferred tasks) up to `max_wait_s` each."""
        outcomes: list[str] = []
        while not self.stopping.is_set():
            outcome = self.run_once()
            if outcome is None:
                due = jobs.next_due_in(self.factory, self.kinds)
                if due is None or due > max_wait_s:
                    return outcomes
                self.stopping.wait(max(due, 0.05))
                continue
            outcomes.append(outcome)
        return outcomes

    def run_forever(self, poll_s: float = 1.0) -> None:
        log.info("worker %s started", self.worker_id)
        if self.settings.builder != BuilderKind.PROCESS and (self.kinds is None or JobKind.PIPELINE in self.kinds):
            from hub_service.sandbox import reap_leftovers

            reap_leftovers(self.settings)  # smoke containers of workers that were killed
        while not self.stopping.is_set():
            try:
                outcome = self.run_once()
            except Exception:  # the database may be down for a moment: wait and try again
                log.exception("worker %s: error between jobs; retrying", self.worker_id)
                outcome = None
            if outcome is None:
                self.stopping.wait(poll_s)
        log.info("worker %s stopped", self.worker_id)


_UNSEEN = object()


def _engine_now() -> tuple[Any, str | None]:
    """A client of the engine and its epoch ("" when it has none to tell), over a new connection;
    (None, None) when it does not answer."""
    from openenv.client.providers._docker import docker_client
    from openenv.images import engine_epoch
    from openenv.images._engine_trouble import ping_anew

    try:
        client = docker_client()
        ping_anew(client)
        return client, engine_epoch(client) or ""
    except Exception:  # down, or no engine here at all
        return None, None


def _host_set_up(client: Any, settings: HubSettings) -> bool:
    """Whether the engine can run containers under the Hub's sandbox runtime (the smoke stage's first check)."""
    from openenv.engines import engine

    try:
        engine().runtime_options(client.api, settings.sandbox_runtime)
    except Exception:  # not set up (or it went away meanwhile): no evidence of a fix
        return False
    return True


def main() -> None:
    """`python -m hub_service.worker [--tasks-only]`: one worker process with the environment's settings."""
    from hub_service.settings import get_settings

    logging.basicConfig(
        level=os.environ.get("OPENENV_HUB_LOG_LEVEL", "INFO"), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    import sys

    worker = Worker(get_settings(), kinds=TASK_KINDS if "--tasks-only" in sys.argv[1:] else None)
    signal.signal(signal.SIGTERM, lambda *_: worker.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: worker.stopping.set())
    worker.run_forever()


if __name__ == "__main__":
    main()
