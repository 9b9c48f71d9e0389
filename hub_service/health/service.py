"""Runtime health of indexed Spaces: poll their stages in one listing, record each transition.

`poll` reads the runtime stage of every tagged Space through the list API (one pass over its
pages, never one call per Space), maps each stage to a health, and appends a transition row when
an env's health changes. `record_stage` does the same for one Space between polls: a play session
that wakes a sleeping Space records each stage it waits through, so the Space's health shows it
waking (sleeping → building → running) at once. `env_health` is what the API and the website show.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from pydantic import BaseModel, Field
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord
from hub_service.catalog.service import get_env
from hub_service.db import session_scope, utcnow
from hub_service.health.models import HealthTransition

__all__ = [
    "HealthReport",
    "HealthView",
    "Transition",
    "env_health",
    "health_of",
    "poll",
    "record_stage",
    "record_stages",
]

log = logging.getLogger("hub_service.health")

_STAGES = {
    "RUNNING": "running",
    "RUNNING_BUILDING": "running",
    "RUNNING_APP_STARTING": "running",
    "SLEEPING": "sleeping",
    "BUILDING": "building",
    "APP_STARTING": "building",
    "BUILD_ERROR": "error",
    "RUNTIME_ERROR": "error",
    "CONFIG_ERROR": "error",
    "NO_APP_FILE": "error",
    "STOPPED": "stopped",
    "PAUSED": "stopped",
    "DELETING": "stopped",
}


def health_of(stage: str | None) -> str:
    """The health a runtime stage means: running, sleeping, building, error, stopped or unknown."""
    return _STAGES.get((stage or "").upper(), "unknown")


@dataclass
class HealthReport:
    seen: int = 0
    transitions: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def poll(factory: sessionmaker[Session], source: object) -> HealthReport:
    """One polling pass over `source.stages()` (an HfSource); returns what changed."""
    start = time.monotonic()
    stages = list(source.stages())  # type: ignore[attr-defined]  # read the Hub before touching the database
    report = record_stages(factory, stages)
    report.seconds = round(time.monotonic() - start, 3)
    log.info("health poll: %s", report.as_dict())
    return report


def record_stages(factory: sessionmaker[Session], stages: Iterable[tuple[str, str, str | None]]) -> HealthReport:
    """Record the stages (owner, name, stage) of hf envs; one transaction."""
    now = utcnow()
    by_key = {(owner, name): stage for owner, name, stage in stages}
    report = HealthReport(seen=len(by_key))
    with session_scope(factory) as session:
        for env in session.scalars(select(EnvRecord).where(EnvRecord.source == "hf", EnvRecord.gone.is_(False))):
            key = (env.owner, env.name)
            if key not in by_key:
                continue  # not listed now: the crawl decides whether it is gone
            report.transitions += _note_stage(session, env, by_key[key], now)
        listed_ids = select(EnvRecord.id).where(EnvRecord.source == "hf", EnvRecord.gone.is_(False))
        session.execute(
            update(EnvRecord)
            .where(EnvRecord.id.in_(listed_ids))
            .values(health_checked_at=now)
            .execution_options(synchronize_session=False)
        )
    return report


def record_stage(factory: sessionmaker[Session], owner: str, name: str, stage: str) -> bool:
    """Record one hf env's stage seen between polls (a play session waking its Space, stage by stage);
    returns whether its health changed. An env the catalog does not hold (or no longer) is left alone."""
    now = utcnow()
    with session_scope(factory) as session:
        env = session.scalar(
            select(EnvRecord).where(
                EnvRecord.source == "hf", EnvRecord.gone.is_(False), EnvRecord.owner == owner, EnvRecord.name == name
            )
        )
        if env is None:
            return False
        env.health_checked_at = now
        return bool(_note_stage(session, env, stage, now))


def _note_stage(session: Session, env: EnvRecord, stage: str | None, now: dt.datetime) -> int:
    """Set the env's stage; append a transition when its health changes. Returns the transitions added."""
    health = health_of(stage)
    env.stage = stage
    if env.health == health:
        return 0
    session.add(HealthTransition(env_id=env.id, health=health, previous=env.health, stage=stage, at=now))
    env.health, env.health_since = health, now
    return 1


class Transition(BaseModel):
    health: str
    previous: str | None = None
    stage: str | None = None
    at: dt.datetime


class HealthView(BaseModel):
    """An env's runtime health now, its recent transitions, and how much of the window it ran."""

    id: str
    health: str | None = Field(
        description="running, sleeping, building, error, stopped, unknown; null before the first poll"
    )
    stage: str | None = Field(default=None, description="The raw runtime stage from the Hub")
    since: dt.datetime | None = None
    checked_at: dt.datetime | None = Field(default=None, description="When the scheduler last polled")
    running_share: float | None = Field(
        default=None, description="Share of the observed time in the window spent running (0..1)"
    )
    window_days: int = 7
    history: list[Transition] = Field(default_factory=list, description="Newest first")


def env_health(session: Session, owner: str, name: str, *, limit: int = 100, window_days: int = 7) -> HealthView:
    """The health of `owner/name` for the API and the website.

    Raises:
        NotFound: no such environment.
    """
    env = get_env(session, owner, name)
    rows = list(
        session.scalars(
            select(HealthTransition)
            .where(HealthTransition.env_id == env.id)
            .order_by(HealthTransition.at.desc(), HealthTransition.id.desc())
            .limit(limit)
        )
    )
    return HealthView(
        id=env.repo_id,
        health=env.health,
        stage=env.stage,
        since=env.health_since,
        checked_at=env.health_checked_at,
        running_share=_running_share(session, env.id, window_days),
        window_days=window_days,
        history=[Transition(health=r.health, previous=r.previous, stage=r.stage, at=r.at) for r in rows],
    )


def _running_share(session: Session, env_id: int, window_days: int) -> float | None:
    now = utcnow()
    start = now - dt.timedelta(days=window_days)
    before = session.scalar(
        select(HealthTransition)
        .where(HealthTransition.env_id == env_id, HealthTransition.at < start)
        .order_by(HealthTransition.at.desc())
        .limit(1)
    )
    inside = list(
        session.scalars(
            select(HealthTransition)
            .where(HealthTransition.env_id == env_id, HealthTransition.at >= start)
            .order_by(HealthTransition.at, HealthTransition.id)
        )
    )
    points = ([(start, before.health)] if before else []) + [(t.at, t.health) for t in inside]
    if not points:
        return None
    observed = running = 0.0
    for (at, health), (until, _) in zip(points, [*points[1:], (now, None)], strict=True):
        span = max(0.0, (until - at).total_seconds())
        observed += span
        running += span if health == "running" else 0.0
    return round(running / observed, 4) if observed > 0 else None
