"""The audit trail: every state change of an environment, appended and never changed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["EVENT_KINDS", "EnvEvent"]

EVENT_KINDS = (
    "indexed",
    "revision",
    "gone",
    "returned",
    "moved",  # the indexer
    "move_ignored",  # webhooks: a move to a name no Space can have
    "validated",
    "built",
    "smoke_tested",
    "passed",
    "failed",
    "cancelled",  # the pipeline
    "waiting",  # the pipeline: waits for the infrastructure
    "queued",
    "yanked",
    "unyanked",
    "deprecated",
    "undeprecated",  # maintainers (queued: a re-run)
    "pr_checked",  # the pull-request bot
)


class EnvEvent(Base):
    """Something that happened to an env (or one of its revisions), with its cause and actor."""

    __tablename__ = "env_events"
    __table_args__ = (Index("ix_env_events_env_id_id", "env_id", "id"),)

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
