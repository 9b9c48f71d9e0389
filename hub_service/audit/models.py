"""The audit trail: every state change of an environment, appended and never changed."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow
from hub_service.vocabularies import closed_vocabulary

__all__ = ["EVENT_KINDS", "EnvEvent", "EventKind"]


class EventKind(StrEnum):
    """What happened to an env: the audit trail's closed vocabulary (checked by the database)."""

    INDEXED = "indexed"  # the indexer: indexed, revision, gone, returned, moved
    REVISION = "revision"
    GONE = "gone"
    RETURNED = "returned"
    MOVED = "moved"
    MOVE_IGNORED = "move_ignored"  # webhooks: a move to a name no Space can have
    VALIDATED = "validated"  # the pipeline: validated ... cancelled
    BUILT = "built"
    SMOKE_TESTED = "smoke_tested"
    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WAITING = "waiting"  # the pipeline: waits for the infrastructure
    QUEUED = "queued"  # maintainers (queued: a re-run) ... undeprecated
    YANKED = "yanked"
    UNYANKED = "unyanked"
    DEPRECATED = "deprecated"
    UNDEPRECATED = "undeprecated"
    PR_CHECKED = "pr_checked"  # the pull-request bot


EVENT_KINDS = tuple(EventKind)


class EnvEvent(Base):
    """Something that happened to an env (or one of its revisions), with its cause and actor."""

    __tablename__ = "env_events"
    __table_args__ = (Index("ix_env_events_env_id_id", "env_id", "id"), closed_vocabulary("kind", EventKind))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    version_id: Mapped[int | None] = mapped_column(Integer, default=None)  # no FK: the trail outlives rows
    sha: Mapped[str | None] = mapped_column(String(64), default=None)
    ref: Mapped[str | None] = mapped_column(String(128), default=None)
    kind: Mapped[str] = mapped_column(String(32))
    summary: Mapped[str] = mapped_column(Text, default="")
    cause: Mapped[str] = mapped_column(Text)  # what made it happen: "hf crawl", "webhook delivery 12", "maintainer ..."
    actor: Mapped[str] = mapped_column(String(128), default="hub")  # "hub", or the maintainer's name
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
