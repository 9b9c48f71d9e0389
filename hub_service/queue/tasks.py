"""Jobs other than pipeline runs: index one repo, sync a pull request, post its report.

They share the pipeline's queue and workers (`Job.kind` says which handler runs; its arguments
are in `Job.payload`). The handlers are registered where the Hub is assembled
(`hub_service.assembly`): this module and the queue know none of them. A handler reads the current state when it runs, so running one twice, late,
or after a newer one does no harm. Errors outside the service (the Hub down) retry with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from hub_service.errors import SourceError
from hub_service.queue import jobs
from hub_service.queue.errors import Transient, describe_exception
from hub_service.settings import HubSettings

__all__ = ["Deferred", "Handler", "TaskContext", "run_task"]

log = logging.getLogger("hub_service.tasks")


@dataclass(frozen=True)
class TaskContext:
    settings: HubSettings
    factory: sessionmaker[Session]
    worker_id: str
    job_id: int
    attempt: int


class Deferred(Exception):
    """The task must wait (another worker holds what it needs); it runs again after `delay_s`."""

    def __init__(self, reason: str, delay_s: float = 1.0) -> None:
        super().__init__(reason)
        self.reason, self.delay_s = reason, delay_s


Handler = Callable[[TaskContext, dict[str, Any]], str]


def run_task(
    handlers: Mapping[str, Handler],
    settings: HubSettings,
    factory: sessionmaker[Session],
    worker_id: str,
    claim: jobs.Claim,
) -> str:
    """Run a claimed task job with its kind's handler; returns "done", "failed", "retry" or "deferred"."""
    handler = handlers.get(claim.kind)
    if handler is None:
        jobs.finish(
            factory,
            claim.job_id,
            worker_id,
            ok=False,
            error=f"no handler for job kind {claim.kind!r}; is this worker older than the service?",
        )
        return "failed"
    ctx = TaskContext(settings, factory, worker_id, claim.job_id, claim.attempt)
    try:
        summary = handler(ctx, claim.payload)
    except Deferred as exc:
        jobs.defer(factory, claim.job_id, worker_id, exc.delay_s, exc.reason)
        return "deferred"
    except (Transient, SourceError) as exc:
        delay = min(60.0, 2.0**claim.attempt)
        state = jobs.requeue(factory, claim.job_id, worker_id, str(exc), delay_s=delay)
        log.warning("%s job %s: %s; %s", claim.kind, claim.job_id, exc, "retrying" if state == "queued" else state)
        return "retry" if state == "queued" else "failed"
    except Exception as exc:  # a bug of ours: fail this job with the error (other jobs go on)
        log.exception("%s job %s crashed", claim.kind, claim.job_id)
        jobs.finish(factory, claim.job_id, worker_id, ok=False, error=f"internal error: {describe_exception(exc)}")
        return "failed"
    log.info("%s job %s: %s", claim.kind, claim.job_id, summary)
    jobs.finish(factory, claim.job_id, worker_id, ok=True, error=None)
    return "done"
