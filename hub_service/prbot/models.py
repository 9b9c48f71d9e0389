"""What the pull-request bot knows about each pull request on an indexed Space."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["PullRequestCheck"]


class PullRequestCheck(Base):
    """One pull request (`refs/pr/{num}`) of an env: its head, the version checked, the bot's comment."""

    __tablename__ = "pr_checks"
    __table_args__ = (UniqueConstraint("env_id", "num", name="uq_pr_checks_env_num"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"), index=True)
    num: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | draft | closed | merged | deleted
    title: Mapped[str | None] = mapped_column(String(300), default=None)
    head_sha: Mapped[str | None] = mapped_column(String(64), default=None)
    version_id: Mapped[int | None] = mapped_column(ForeignKey("env_versions.id", ondelete="SET NULL"), default=None)
    comment_id: Mapped[str | None] = mapped_column(String(64), default=None)
    # What the comment shows now ("<sha>:<state>"), so an unchanged verdict is not posted again.
    reported: Mapped[str | None] = mapped_column(String(128), default=None)
    # A worker posting or editing the comment holds this lease, so two never post at once.
    lease_by: Mapped[str | None] = mapped_column(String(128), default=None)
    lease_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
