"""Tables of the shared limits: token buckets and play leases (times are epoch seconds)."""

from __future__ import annotations

from sqlalchemy import Float, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base

__all__ = ["PlayLease", "RateBucket"]


class RateBucket(Base):
    """The tokens `client` had left in `category` at `updated_at` (refilled by the rule's rate since).

    Times are seconds since the epoch by the database's clock on PostgreSQL (the API hosts' clocks
    may differ); SQLite is only ever shared by processes of one host, which use their own clock.
    """

    __tablename__ = "rate_buckets"
    __table_args__ = (Index("ix_rate_buckets_category_updated_at", "category", "updated_at"),)

    category: Mapped[str] = mapped_column(String(16), primary_key=True)
    client: Mapped[str] = mapped_column(String(128), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class PlayLease(Base):
    """A play session or model try (`kind`) that `holder` (one Hub process) holds for `visitor`;
    it counts against the caps until `expires_at`, which the holder's heartbeat keeps pushing on."""

    __tablename__ = "play_leases"
    __table_args__ = (
        Index("ix_play_leases_visitor_expires_at", "visitor", "expires_at"),
        Index("ix_play_leases_holder", "holder"),
        Index("ix_play_leases_expires_at", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    visitor: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(8))
    env_id: Mapped[str] = mapped_column(String(255))
    expires_at: Mapped[float] = mapped_column(Float)
