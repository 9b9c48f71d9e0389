"""Tables of leadership: the lease on the periodic duties and the record of their runs (times are
epoch seconds, by the database's clock on PostgreSQL; SQLite is shared only by one host's processes)."""

from __future__ import annotations

from sqlalchemy import Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base

__all__ = ["DutyRun", "ServiceLease"]


class ServiceLease(Base):
    """Who runs the duties of group `name` until `expires_at`; `term` grows with each new holder."""

    __tablename__ = "service_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    term: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class DutyRun(Base):
    """One run of a periodic duty (`reconcile`, `health`, `collect`) by the leader of `term`;
    `finished_at` stays empty when its process died during the run."""

    __tablename__ = "duty_runs"
    __table_args__ = (Index("ix_duty_runs_started_at", "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    duty: Mapped[str] = mapped_column(String(16))
    holder: Mapped[str] = mapped_column(String(128))
    term: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, default=None)
    outcome: Mapped[str | None] = mapped_column(String(16), default=None)
