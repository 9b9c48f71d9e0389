"""The job queue's table: a unit of background work that one worker claims at a time."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow
from hub_service.queue.kinds import JobKind, JobState
from hub_service.vocabularies import closed_vocabulary

__all__ = ["JOB_KINDS", "JOB_STATES", "Job"]

JOB_STATES = tuple(JobState)
# pipeline: run the stages on `version_id`. The others carry their arguments in `payload`
# (handlers registered by hub_service/assembly.py): index one repo, sync a pull request, post its report.
JOB_KINDS = tuple(JobKind)


class Job(Base):
    """A unit of background work (a pipeline run, or a task). Claimed atomically by one worker."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_state_priority_id", "state", "priority", "id"),
        Index("ix_jobs_subject_state", "subject", "state"),
        closed_vocabulary("state", JobState),
        closed_vocabulary("kind", JobKind),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), default=JobKind.PIPELINE)
    version_id: Mapped[int | None] = mapped_column(
        ForeignKey("env_versions.id", ondelete="CASCADE"), index=True, default=None
    )
    payload: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    # What the job is about ("repo:hf:owner/name", "pr:12:3"): a queued job per subject is enough.
    subject: Mapped[str | None] = mapped_column(String(300), default=None)
    run_after: Mapped[dt.datetime | None] = mapped_column(default=None)  # not claimed before this time
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED)
    priority: Mapped[int] = mapped_column(Integer, default=100)  # lower runs first
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # Runs given back because the infrastructure failed (they never use up attempts); sets the backoff.
    infra_retries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # All such give-backs and when the first was: never reset by a wake-up, so the Hub's caps end every wait.
    infra_waits: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    first_waited_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    worker_id: Mapped[str | None] = mapped_column(String(128), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
