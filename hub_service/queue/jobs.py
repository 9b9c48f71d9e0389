"""The job queue in the database: claim atomically, heartbeat, reclaim the stale, finish.

Claiming is one `UPDATE ... WHERE id = (SELECT ... LIMIT 1 [FOR UPDATE SKIP LOCKED]) RETURNING`
statement: on PostgreSQL concurrent workers skip each other's locked rows; on SQLite the statement
runs under the database's single writer lock. Either way no two workers get the same job.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from hub_service import lifecycle
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.db import affected_rows, session_scope, utcnow
from hub_service.queue.kinds import JobKind, JobState
from hub_service.queue.models import Job

__all__ = [
    "Claim",
    "Waited",
    "cancel",
    "claim",
    "defer",
    "enqueue",
    "enqueue_task",
    "finish",
    "heartbeat",
    "next_due_in",
    "reclaim_stale",
    "requeue",
    "wait_for_infrastructure",
    "waiting_summary",
    "wake_waiting",
]


@dataclass(frozen=True)
class Claim:
    job_id: int
    version_id: int | None
    attempt: int
    kind: str = JobKind.PIPELINE
    payload: dict[str, Any] = field(default_factory=dict)


def enqueue(
    session: Session, version_id: int, *, priority: int = 100, max_attempts: int = 3, kind: str = JobKind.PIPELINE
) -> Job:
    """Queue a pipeline job for a version (in the caller's transaction)."""
    job = Job(version_id=version_id, priority=priority, max_attempts=max_attempts, kind=kind)
    session.add(job)
    return job


def enqueue_task(
    session: Session, kind: str, subject: str, payload: dict[str, Any], *, priority: int = 50, max_attempts: int = 5
) -> tuple[Job, bool]:
    """Queue a task job unless one for the same kind and subject is already waiting.

    A waiting job takes the newer payload (tasks read the current state when they run, so one run
    covers every request made while it waited). Returns the job and whether it is new.
    """
    waiting = session.scalar(
        select(Job)
        .where(Job.subject == subject, Job.kind == kind, Job.state == JobState.QUEUED)
        .order_by(Job.id)
        .limit(1)
    )
    if waiting is not None:
        waiting.payload = {**(waiting.payload or {}), **payload}
        waiting.priority = min(waiting.priority, priority)
        return waiting, False
    job = Job(kind=kind, subject=subject, payload=payload, priority=priority, max_attempts=max_attempts)
    session.add(job)
    session.flush()
    return job, True


def cancel(session: Session, job_ids: list[int], reason: str) -> int:
    """Cancel queued or running jobs; a running one's worker notices at its next heartbeat.

    Returns how many were cancelled.
    """
    if not job_ids:
        return 0
    result = session.execute(
        update(Job)
        .where(Job.id.in_(job_ids), Job.state.in_((JobState.QUEUED, JobState.RUNNING)))
        .values(state=JobState.CANCELLED, finished_at=utcnow(), error=reason)
    )
    return affected_rows(result) or 0


def claim(factory: sessionmaker[Session], worker_id: str, kinds: tuple[str, ...] | None = None) -> Claim | None:
    """Take the next queued job (of one of `kinds`, default any) for `worker_id`, or None when
    there is none due."""
    now = utcnow()
    due = [Job.state == JobState.QUEUED, or_(Job.run_after.is_(None), Job.run_after <= now)]
    if kinds is not None:
        due.append(Job.kind.in_(kinds))
    next_id = (
        select(Job.id)
        .where(*due)
        .order_by(Job.priority, Job.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    stmt = (
        update(Job)
        .where(and_(Job.id == next_id, Job.state == JobState.QUEUED))
        .values(
            state=JobState.RUNNING, worker_id=worker_id, claimed_at=now, heartbeat_at=now, attempts=Job.attempts + 1
        )
        .returning(Job.id, Job.version_id, Job.attempts, Job.kind, Job.payload)
    )
    with session_scope(factory) as session:
        row = session.execute(stmt).first()
        if row is None:
            return None
        version = session.get(EnvVersion, row.version_id) if row.kind == JobKind.PIPELINE else None
        if version is not None:
            env = session.get_one(EnvRecord, version.env_id)
            lifecycle.move(session, env, version, VersionState.RUNNING, cause=f"pipeline job {row.id}")
        return Claim(
            job_id=row.id, version_id=row.version_id, attempt=row.attempts, kind=row.kind, payload=row.payload or {}
        )


def heartbeat(factory: sessionmaker[Session], job_id: int, worker_id: str) -> bool:
    """Record that the worker still runs the job; False when the job was taken away or cancelled."""
    with session_scope(factory) as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING)
            .values(heartbeat_at=utcnow())
        )
        return affected_rows(result) == 1


def finish(factory: sessionmaker[Session], job_id: int, worker_id: str, *, ok: bool, error: str | None = None) -> bool:
    """Mark the job done or failed; False if it was no longer ours (reclaimed meanwhile)."""
    with session_scope(factory) as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING)
            .values(state=JobState.DONE if ok else JobState.FAILED, finished_at=utcnow(), error=error)
        )
        return affected_rows(result) == 1


def requeue(factory: sessionmaker[Session], job_id: int, worker_id: str, error: str, delay_s: float = 0.0) -> str:
    """Give a job back after a transient failure: queued again (due after `delay_s`), or failed
    when out of attempts. Returns the job's new state."""
    with session_scope(factory) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.worker_id != worker_id or job.state != JobState.RUNNING:
            return "lost"
        if job.attempts >= job.max_attempts:
            job.state, job.finished_at, job.error = (
                JobState.FAILED,
                utcnow(),
                f"gave up after {job.attempts} attempts: {error}",
            )
        else:
            job.state, job.worker_id, job.error = JobState.QUEUED, None, error
            job.run_after = utcnow() + dt.timedelta(seconds=delay_s) if delay_s > 0 else None
        return job.state


def defer(factory: sessionmaker[Session], job_id: int, worker_id: str, delay_s: float, reason: str) -> bool:
    """Put a job back to run again after `delay_s`, without using up an attempt (it waited on
    something, it did not fail). False if it was no longer ours."""
    with session_scope(factory) as session:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING)
            .values(
                state=JobState.QUEUED,
                worker_id=None,
                attempts=Job.attempts - 1,
                error=reason,
                run_after=utcnow() + dt.timedelta(seconds=delay_s),
            )
        )
        return affected_rows(result) == 1


@dataclass(frozen=True)
class Waited:
    """What `wait_for_infrastructure` did: queued again after `delay` seconds, or (`gave_up`, a
    sentence) failed because the job reached a cap; `waits` counts its give-backs so far."""

    delay: float | None
    waits: int
    gave_up: str | None = None


def wait_for_infrastructure(
    factory: sessionmaker[Session],
    job_id: int,
    worker_id: str,
    reason: str,
    *,
    first_s: float,
    max_s: float,
    max_waits: int | None = None,
    max_wait_s: float | None = None,
    counted: bool = True,
) -> Waited | None:
    """Give a job back because the infrastructure failed it: queued again after a backoff that
    doubles with each such retry (`first_s`, twice that, four times, ... up to `max_s`), without using up an
    attempt; or, once it has been given back `max_waits` times or its first wait was `max_wait_s` ago,
    failed (no wait is endless). A wait that is not `counted` (the host's set-up: the operator's to fix,
    never the env's) neither counts toward the caps nor ends in failure: it comes back at the longest
    backoff until the host is fixed. Returns what was done, or None if the job was no longer ours."""
    with session_scope(factory) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.worker_id != worker_id or job.state != JobState.RUNNING:
            return None
        now = utcnow()
        first = job.first_waited_at or (now if counted else None)
        waits = (job.infra_waits or 0) + counted
        waited_s = (now - first).total_seconds() if first is not None else 0.0
        gave_up = None
        if counted and max_waits is not None and waits >= max_waits:
            gave_up = f"gave up waiting for the infrastructure after {waits} tries over {_span(waited_s)} (the Hub's cap is {max_waits} tries)"
        elif counted and max_wait_s is not None and waited_s >= max_wait_s:
            gave_up = f"gave up waiting for the infrastructure after {waits} tries over {_span(waited_s)} (the Hub's cap is {_span(max_wait_s)})"
        job.infra_waits, job.first_waited_at = waits, first
        if gave_up is not None:
            job.state, job.finished_at, job.error = JobState.FAILED, now, f"{gave_up}: {reason}"
            return Waited(None, waits, gave_up)
        delay = min(max_s, first_s * 2 ** min(job.infra_retries, 30))
        job.state, job.worker_id, job.error = JobState.QUEUED, None, reason
        job.attempts = max(0, job.attempts - 1)
        job.infra_retries += 1
        job.run_after = now + dt.timedelta(seconds=delay)
        return Waited(delay, waits)


def _span(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def wake_waiting(factory: sessionmaker[Session], codes: frozenset[str] | set[str] | None = None) -> int:
    """Make the queued jobs of versions waiting for the infrastructure (for one of `codes`, default
    any) due now, with their backoff reset: the cause may be fixed (the engine answers again, the
    service restarted with a new base image). Returns how many."""
    waiting = select(EnvVersion.id).where(EnvVersion.state == VersionState.WAITING)
    if codes is not None:
        waiting = waiting.where(EnvVersion.waiting_code.in_(sorted(codes)))
    with session_scope(factory) as session:
        result = session.execute(
            update(Job)
            .where(Job.kind == JobKind.PIPELINE, Job.state == JobState.QUEUED, Job.version_id.in_(waiting))
            .values(run_after=None, infra_retries=0)
        )
        return affected_rows(result) or 0


def next_due_in(factory: sessionmaker[Session], kinds: tuple[str, ...] | None = None) -> float | None:
    """Seconds until the next queued job (of `kinds`) may be claimed (0 when one is due now), None
    when none is queued."""
    stmt = select(Job.run_after).where(Job.state == JobState.QUEUED)
    if kinds is not None:
        stmt = stmt.where(Job.kind.in_(kinds))
    with factory() as session:
        queued = session.execute(stmt.order_by(Job.run_after.asc().nulls_first()).limit(1)).first()
    if queued is None:
        return None
    due = queued[0]
    return 0.0 if due is None else max(0.0, (due - utcnow()).total_seconds())


def reclaim_stale(factory: sessionmaker[Session], stale_after_s: float) -> list[tuple[int, str]]:
    """Requeue jobs whose worker stopped heartbeating (killed, crashed, machine lost).

    Jobs out of attempts fail instead, and their version is marked failed with the reason.
    Returns (job id, new state) for each job touched.
    """
    cutoff = utcnow() - dt.timedelta(seconds=stale_after_s)
    touched: list[tuple[int, str]] = []
    with session_scope(factory) as session:
        stale = session.scalars(
            select(Job)
            .where(Job.state == JobState.RUNNING, Job.heartbeat_at < cutoff)
            .with_for_update(skip_locked=True)
        ).all()
        for job in stale:
            reason = f"worker {job.worker_id} stopped responding during attempt {job.attempts}"
            pipeline = job.kind == JobKind.PIPELINE and job.version_id is not None
            if job.attempts >= job.max_attempts:
                job.state, job.finished_at, job.error = (
                    JobState.FAILED,
                    utcnow(),
                    f"{reason}; gave up after {job.attempts} attempts",
                )
                version = session.get(EnvVersion, job.version_id) if pipeline else None
                if version is not None and version.state not in lifecycle.FINISHED:
                    lifecycle.move(
                        session,
                        session.get_one(EnvRecord, version.env_id),
                        version,
                        VersionState.FAILED,
                        cause=f"pipeline job {job.id}",
                        failure_stage=version.failure_stage or "worker",
                        failure_reason=job.error,
                    )
            else:
                job.state, job.worker_id, job.error = JobState.QUEUED, None, reason
                version = session.get(EnvVersion, job.version_id) if pipeline else None
                if version is not None and version.state == VersionState.RUNNING:
                    env = session.get_one(EnvRecord, version.env_id)
                    lifecycle.move(session, env, version, VersionState.QUEUED, cause=f"pipeline job {job.id}")
            touched.append((job.id, job.state))
    return touched


def waiting_summary(session: Session) -> dict[str, Any]:
    """For the Hub's health endpoint: how many revisions wait for the infrastructure, by code, and
    (`host_setup`, None when none) how many wait for the host's set-up and the latest reason: the
    operator's to fix, and nothing runs them until it is."""
    from sqlalchemy import func

    from hub_service.queue.errors import WaitCode

    waiting = select(EnvVersion.waiting_code, func.count()).where(EnvVersion.state == VersionState.WAITING)
    counts = {str(code): int(n) for code, n in session.execute(waiting.group_by(EnvVersion.waiting_code)).all()}
    host = None
    if counts.get(WaitCode.HOST_SETUP):
        reason = session.scalar(
            select(EnvVersion.waiting_reason)
            .where(EnvVersion.state == VersionState.WAITING, EnvVersion.waiting_code == WaitCode.HOST_SETUP)
            .order_by(EnvVersion.waiting_since.desc(), EnvVersion.id.desc())
            .limit(1)
        )
        host = {"revisions": counts[WaitCode.HOST_SETUP], "reason": reason}
    return {"waiting": counts, "host_setup": host}
