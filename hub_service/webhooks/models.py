"""Webhook deliveries as received (one row per delivery applied), and the replay window's memory."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["WebhookDelivery", "WebhookSubject"]


class WebhookDelivery(Base):
    """A webhook payload the service accepted, what it made of it, and the jobs it queued."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # sha256 of the canonical payload. Not unique: the Hub sends no delivery id, so the same change
    # made twice (a pull request closed, reopened, closed again) is byte-identical, and both count.
    key: Mapped[str] = mapped_column(String(64), index=True)
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    scope: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(16))
    repo_type: Mapped[str] = mapped_column(String(16))
    repo: Mapped[str] = mapped_column(String(200), index=True)
    head_sha: Mapped[str | None] = mapped_column(String(64), default=None)
    discussion_num: Mapped[int | None] = mapped_column(Integer, default=None)
    webhook_id: Mapped[str | None] = mapped_column(String(64), default=None)
    outcome: Mapped[str] = mapped_column(String(16))  # queued | ignored
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    job_ids: Mapped[list[str]] = mapped_column(default=list)


class WebhookSubject(Base):
    """The last payload seen for one repo, and when: a byte-identical delivery within the replay
    window with nothing else for that repo in between is a duplicate (it would change nothing)."""

    __tablename__ = "webhook_subjects"

    subject: Mapped[str] = mapped_column(String(300), primary_key=True)  # "<repo type>:<repo name>"
    last_key: Mapped[str] = mapped_column(String(64))
    last_delivery: Mapped[int | None] = mapped_column(Integer, default=None)
    seen_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
