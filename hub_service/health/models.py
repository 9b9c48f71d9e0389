"""Runtime health history: one row each time an env's health changes."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["HEALTH_STATES", "HealthTransition"]

HEALTH_STATES = ("running", "sleeping", "building", "error", "stopped", "unknown")


class HealthTransition(Base):
    """The env's health became `health` (raw stage `stage`) at `at`; it was `previous` before."""

    __tablename__ = "health_transitions"
    __table_args__ = (Index("ix_health_transitions_env_id_at", "env_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    health: Mapped[str] = mapped_column(String(16))
    previous: Mapped[str | None] = mapped_column(String(16), default=None)
    stage: Mapped[str | None] = mapped_column(String(32), default=None)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
