"""The log and timing of every pipeline stage of a revision (the catalog shows them)."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from sqlalchemy import Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow
from hub_service.vocabularies import closed_vocabulary

__all__ = ["StageName", "StageRun", "StageStatus"]


class StageName(StrEnum):
    """The stages of a pipeline run, in order."""

    FETCH = "fetch"
    VALIDATE = "validate"
    BUILD = "build"
    SMOKE = "smoke"
    PUBLISH = "publish"


class StageStatus(StrEnum):
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


class StageRun(Base):
    """One stage (fetch, validate, build, smoke, publish) of one attempt of a job."""

    __tablename__ = "stage_runs"
    __table_args__ = (
        closed_vocabulary("stage", StageName),
        closed_vocabulary("status", StageStatus),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("env_versions.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    stage: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default=StageStatus.RUNNING)
    log: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    seconds: Mapped[float | None] = mapped_column(Float, default=None)
