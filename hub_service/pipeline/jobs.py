"""The job queue in the database: claim atomically, heartbeat, reclaim the stale, finish.

Claiming is one `UPDATE ... WHERE id = (SELECT ... LIMIT 1 [FOR UPDATE SKIP LOCKED]) RETURNING`
statement: on PostgreSQL concurrent workers skip each other's locked rows; on SQLite the statement
runs under the database's single writer lock. Either way no two workers get the same job.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import and_, select, update
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import session_scope, utcnow
from hub_service.pipeline.models import Job

__all__ = ["Claim", "claim", "enqueue", "finish", "heartbeat", "reclaim_stale", "requeue"]


@dataclass(frozen=True)
class Claim:
    job_id: int
    version_id: int
    attempt: int


def enqueue(session: Session, version_id: int, *, priority: int = 100, max_attempts: int = 3, kind: str = "pipeline") -> Job:
    """Queue a pipeline job for a version (in the caller's transaction)."""
    job = Job(version_id=version_id, priority=priority, max_attempts=max_attempts, kind=kind)
    session.add(job)
    return job


def claim(factory: sessionmaker[Session], worker_id: str) -> Claim | None:
    """Take the next queued job for `worker_id`, or None when the queue is empty."""
    now = utcnow()
    next_id = (
        select(Job.id)
        .where(Job.state == "queued")
        .order_by(Job.priority, Job.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    stmt = (
        update(Job)
        .where(and_(Job.id == next_id, Job.state == "queued"))
        .values(state="running", worker_id=worker_id, claimed_at=now, heartbeat_at=now, attempts=Job.attempts + 1)
        .returning(Job.id, Job.version_id, Job.attempts)
    )
    with session_scope(factory) as session:
        row = session.execute(stmt).first()
        if row is None:
            return None
        session.execute(update(EnvVersion).where(EnvVersion.id == row.version_id).values(state="running"))
        return Claim(job_id=row.id, version_id=row.version_id, attempt=row.attempts)


def heartbeat(factory: sessionmaker[Session], job_id: int, worker_id: str) -> bool:
    """Record that the worker still runs the job; False when the job was taken away or cancelled."""
    with session_scope(factory) as session:
        result = session.execute(
            update(Job).where(Job.id == job_id, Job.worker_id == worker_id, Job.state == "running").values(heartbeat_at=utcnow())
        )
        return result.rowcount == 1


def finish(factory: sessionmaker[Session], job_id: int, worker_id: str, *, ok: bool, error: str | None = None) -> bool:
    """Mark the job done or failed; False if it was no longer ours (reclaimed meanwhile)."""
    with session_scope(factory) as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == "running")
            .values(state="done" if ok else "failed", finished_at=utcnow(), error=error)
        )
        return result.rowcount == 1


def requeue(factory: sessionmaker[Session], job_id: int, worker_id: str, error: str) -> str:
    """Give a job back after a transient failure: queued again, or failed when out of attempts.

    Returns the job's new state.
    """
    with session_scope(factory) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.worker_id != worker_id or job.state != "running":
            return "lost"
        if job.attempts >= job.max_attempts:
            job.state, job.finished_at, job.error = "failed", utcnow(), f"gave up after {job.attempts} attempts: {error}"
        else:
            job.state, job.worker_id, job.error = "queued", None, error
        return job.state


def reclaim_stale(factory: sessionmaker[Session], stale_after_s: float) -> list[tuple[int, str]]:
    """Requeue jobs whose worker stopped heartbeating (killed, crashed, machine lost).

    Jobs out of attempts fail instead, and their version is marked failed with the reason.
    Returns (job id, new state) for each job touched.
    """
    cutoff = utcnow() - dt.timedelta(seconds=stale_after_s)
    touched: list[tuple[int, str]] = []
    with session_scope(factory) as session:
        stale = session.scalars(
            select(Job).where(Job.state == "running", Job.heartbeat_at < cutoff).with_for_update(skip_locked=True)
        ).all()
        for job in stale:
            reason = f"worker {job.worker_id} stopped responding during attempt {job.attempts}"
            if job.attempts >= job.max_attempts:
                job.state, job.finished_at, job.error = "failed", utcnow(), f"{reason}; gave up after {job.attempts} attempts"
                version = session.get(EnvVersion, job.version_id)
                if version is not None and version.state not in ("passed", "failed"):
                    version.state, version.finished_at = "failed", utcnow()
                    version.failure_stage = version.failure_stage or "worker"
                    version.failure_reason = job.error
                    env = session.get(EnvRecord, version.env_id)
                    if env is not None and env.sha == version.sha:
                        apply_verdict(env, version)
            else:
                job.state, job.worker_id, job.error = "queued", None, reason
                session.execute(update(EnvVersion).where(EnvVersion.id == job.version_id).values(state="queued"))
            touched.append((job.id, job.state))
    return touched
