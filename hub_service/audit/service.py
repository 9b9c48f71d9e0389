"""Recording and reading the audit trail (append-only: rows are inserted, never updated)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.audit.models import EVENT_KINDS, EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.errors import InvalidRequest

__all__ = ["list_events", "record"]


def record(
    session: Session,
    env: EnvRecord | int,
    kind: str,
    summary: str,
    *,
    cause: str,
    actor: str = "hub",
    version: EnvVersion | None = None,
    **details: Any,
) -> EnvEvent:
    """Append an event to `env`'s trail in the caller's transaction; returns it.

    Args:
        cause: why it happened, in words a reader of the trail understands ("webhook delivery 12").
        actor: "hub" for the service itself, else who acted (a maintainer's name).
    """
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}; add it to hub_service.audit.models.EventKind")
    env_id = env if isinstance(env, int) else env.id
    event = EnvEvent(
        env_id=env_id,
        kind=kind,
        summary=summary,
        cause=cause,
        actor=actor,
        details=details,
        version_id=version.id if version is not None else None,
        sha=version.sha if version is not None else None,
        ref=version.ref if version is not None else None,
    )
    session.add(event)
    return event


def list_events(
    session: Session, env: EnvRecord, *, limit: int = 50, before: int | None = None, kinds: list[str] | None = None
) -> tuple[list[EnvEvent], int | None]:
    """Events of `env`, newest first; returns a page and the `before` value of the next page."""
    unknown = sorted(set(kinds or []) - set(EVENT_KINDS))
    if unknown:
        raise InvalidRequest(f"unknown event kind {', '.join(unknown)}; kinds: {', '.join(EVENT_KINDS)}")
    stmt = select(EnvEvent).where(EnvEvent.env_id == env.id)
    if before is not None:
        stmt = stmt.where(EnvEvent.id < before)
    if kinds:
        stmt = stmt.where(EnvEvent.kind.in_(kinds))
    rows = list(session.scalars(stmt.order_by(EnvEvent.id.desc()).limit(limit + 1)))
    next_before = rows[limit - 1].id if len(rows) > limit else None
    return rows[:limit], next_before
