"""Tables of registered lock files (hub_service/locks registers them): a lock, its sha256 as id, and the
versions it names. Here, beside the versions, because resolving and image collection read them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from hub_service.db import Base, utcnow

__all__ = ["ImageLock", "ImageLockEntry"]


class ImageLock(Base):
    """A lock file `openenv lock` registered. Live until `expires_at`, which each resolve through
    it (`?lock=ID`) pushes on; while live, the images of the versions it names are never collected."""

    __tablename__ = "image_locks"
    __table_args__ = (
        Index("ix_image_locks_expires_at", "expires_at"),
        Index("ix_image_locks_owner_expires_at", "owner", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the lock's canonical JSON
    document: Mapped[dict[str, Any]] = mapped_column()  # the lock file as posted
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column()
    renewed_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    owner: Mapped[str | None] = mapped_column(String(96), default=None)  # the Hugging Face user who registered it

    entries: Mapped[list[ImageLockEntry]] = relationship(
        back_populates="lock", cascade="all, delete-orphan", lazy="raise_on_sql"
    )


class ImageLockEntry(Base):
    """One env revision a lock names."""

    __tablename__ = "image_lock_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    lock_id: Mapped[str] = mapped_column(ForeignKey("image_locks.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("env_versions.id", ondelete="CASCADE"), index=True)

    lock: Mapped[ImageLock] = relationship(back_populates="entries", lazy="raise_on_sql")
