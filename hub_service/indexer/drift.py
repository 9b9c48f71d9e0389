"""Drift: how many envs a full reconcile pass had to correct.

Webhooks keep the catalog live; the periodic reconcile catches what they missed. Every env a pass
creates, moves to a new sha, marks gone or brings back is something the catalog had wrong until
then, so the count is recorded (one row per pass, a warning in the log) and shown in
`GET /api/v1/health`, for an operator to see drift instead of it being quietly fixed.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy import Boolean, Integer, String, delete, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["CORRECTIONS", "ReconcileDrift", "drift_summary", "note_drift"]

log = logging.getLogger("hub_service.indexer")

# The audit kinds of an index pass that correct the catalog (a refresh of likes or stage does not:
# the Hub sends no webhook for those).
CORRECTIONS = ("indexed", "revision", "gone", "returned")
_KEEP = 500  # passes kept per source


class ReconcileDrift(Base):
    """One full index pass of a source and how many envs it corrected."""

    __tablename__ = "reconcile_drift"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(16), index=True)
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    seen: Mapped[int] = mapped_column(Integer, default=0)
    corrected: Mapped[int] = mapped_column(Integer, default=0)
    # The first pass over a source finds everything "new": a baseline, not drift.
    baseline: Mapped[bool] = mapped_column(Boolean, default=False)
    details: Mapped[list[str]] = mapped_column(default=list)  # "owner/name: indexed|revision|gone|returned"


def note_drift(session: Session, source: str, seen: int, corrections: list[str]) -> ReconcileDrift:
    """Record a full pass of `source` that made `corrections` ("owner/name: kind" each)."""
    baseline = session.scalar(select(ReconcileDrift.id).where(ReconcileDrift.source == source).limit(1)) is None
    row = ReconcileDrift(
        source=source,
        seen=seen,
        corrected=0 if baseline else len(corrections),
        baseline=baseline,
        details=[] if baseline else corrections[:200],
    )
    session.add(row)
    if row.corrected:
        shown = ", ".join(corrections[:20]) + (" ..." if len(corrections) > 20 else "")
        log.warning(
            "drift: the %s reconcile corrected %d env(s) the webhooks had not: %s", source, row.corrected, shown
        )
    else:
        log.info("drift: the %s reconcile corrected no env%s", source, " (baseline pass)" if baseline else "")
    old = session.scalars(
        select(ReconcileDrift.id)
        .where(ReconcileDrift.source == source)
        .order_by(ReconcileDrift.id.desc())
        .offset(_KEEP)
    ).all()
    if old:
        session.execute(delete(ReconcileDrift).where(ReconcileDrift.id.in_(old)))
    return row


def drift_summary(session: Session) -> dict[str, Any]:
    """Per source: the last pass (when, how many corrected, which) and the total corrected."""
    out: dict[str, Any] = {}
    for source, total, passes in session.execute(
        select(ReconcileDrift.source, func.sum(ReconcileDrift.corrected), func.count()).group_by(ReconcileDrift.source)
    ).all():
        last = session.scalar(
            select(ReconcileDrift).where(ReconcileDrift.source == source).order_by(ReconcileDrift.id.desc()).limit(1)
        )
        assert last is not None
        out[source] = {
            "last_at": last.at.isoformat(),
            "last_corrected": last.corrected,
            "last_details": last.details[:20],
            "corrected_total": int(total or 0),
            "passes": int(passes),
        }
    return out
