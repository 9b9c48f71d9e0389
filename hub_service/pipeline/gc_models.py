"""The record of registry collection (hub_service/pipeline/registry_gc.py): every manifest it
planned to delete (a dry run) or deleted, appended and never changed."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, CheckConstraint, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["DELETION_OUTCOMES", "RegistryDeletion"]

# planned: a dry run's; deleted: the registry took it; gone: it was not there; failed: the registry refused
DELETION_OUTCOMES = ("planned", "deleted", "gone", "failed")


class RegistryDeletion(Base):
    """One manifest (`repository@digest`) that collection planned to delete or deleted."""

    __tablename__ = "registry_deletions"
    __table_args__ = (
        Index("ix_registry_deletions_at", "at"),
        CheckConstraint(f"outcome IN ({', '.join(repr(o) for o in DELETION_OUTCOMES)})", name="outcome"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    repository: Mapped[str] = mapped_column(String(255))
    digest: Mapped[str] = mapped_column(String(80))
    version_id: Mapped[int | None] = mapped_column(Integer, default=None)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text, default="", server_default="")
