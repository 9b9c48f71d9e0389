"""Incremental indexing: bring the catalog in line with what a source has now.

An unchanged sha does no work beyond refreshing cheap fields (likes, stage, URL); a new or changed
sha gets a version row and a pipeline job; an env the source no longer lists is marked gone —
never deleted — and comes back if it reappears.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import session_scope, utcnow
from hub_service.indexer.sources import Source, SourceEnv
from hub_service.pipeline.models import Job

__all__ = ["IndexReport", "index_source", "search_text"]

log = logging.getLogger("hub_service.indexer")

_CHEAP_FIELDS = ("tags", "likes", "private", "stage", "subdomain", "host", "title", "description", "last_modified", "location")


@dataclass
class IndexReport:
    source: str
    seen: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    refreshed: int = 0
    gone: int = 0
    returned: int = 0
    jobs: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def search_text(owner: str, name: str, title: str | None, description: str | None, tags: list[str]) -> str:
    """What text search matches against: names, title, description, and `#tag ` tokens."""
    words = " ".join(x for x in (f"{owner}/{name}", name.replace("_", " "), title or "", description or "") if x).lower()
    return words + " " + "".join(f"#{t.lower()} " for t in tags)


def index_source(factory: sessionmaker[Session], source: Source, max_attempts: int = 3, priority: int = 100) -> IndexReport:
    """Index everything `source` lists; returns what changed. One transaction for the whole pass."""
    start = time.monotonic()
    report = IndexReport(source=source.name)
    listed = list(source.list())  # read the source before touching the database
    now = utcnow()
    with session_scope(factory) as session:
        existing = {(e.owner, e.name): e for e in session.scalars(select(EnvRecord).where(EnvRecord.source == source.name))}
        seen: set[tuple[str, str]] = set()
        to_version: list[tuple[EnvRecord, str]] = []
        for item in listed:
            key = (item.owner, item.name)
            if key in seen or not item.sha:
                continue
            seen.add(key)
            report.seen += 1
            env = existing.get(key)
            if env is None:
                env = _new_env(source, item, now)
                session.add(env)
                report.new += 1
                to_version.append((env, item.sha))
                continue
            if env.gone:
                env.gone, env.gone_at = False, None
                report.returned += 1
            if env.sha != item.sha:
                report.changed += 1
                env.sha, env.indexed_at = item.sha, now
                _refresh(env, item)
                to_version.append((env, item.sha))
            else:
                report.unchanged += 1
                if _refresh(env, item):
                    report.refreshed += 1
        for key, env in existing.items():
            if key not in seen and not env.gone:
                env.gone, env.gone_at = True, now
                report.gone += 1
        session.flush()  # ids for the new envs
        report.jobs = _enqueue(session, to_version, max_attempts, priority)
    report.seconds = round(time.monotonic() - start, 3)
    log.info("indexed %s: %s", source.name, report.as_dict())
    return report


def _enqueue(session: Session, pairs: list[tuple[EnvRecord, str]], max_attempts: int, priority: int) -> int:
    """Make a version and a pipeline job per (env, sha), reusing versions seen before (a revert
    to a tested sha takes that version's verdict again, with no new job)."""
    if not pairs:
        return 0
    wanted = {(env.id, sha) for env, sha in pairs}
    known: dict[tuple[int, str], EnvVersion] = {}
    env_ids = sorted({env_id for env_id, _ in wanted})
    for chunk in range(0, len(env_ids), 5000):
        for v in session.scalars(select(EnvVersion).where(EnvVersion.env_id.in_(env_ids[chunk : chunk + 5000]))):
            if (v.env_id, v.sha) in wanted:
                known[(v.env_id, v.sha)] = v
    fresh: list[EnvVersion] = []
    for env, sha in pairs:
        version = known.get((env.id, sha))
        if version is not None:
            if version.state in ("passed", "failed"):
                apply_verdict(env, version)
            continue  # queued or running: its job exists already
        fresh.append(EnvVersion(env_id=env.id, sha=sha, ref="main", state="queued"))
    session.add_all(fresh)
    session.flush()
    session.add_all([Job(version_id=v.id, max_attempts=max_attempts, priority=priority) for v in fresh])
    return len(fresh)


def _new_env(source: Source, item: SourceEnv, now: object) -> EnvRecord:
    env = EnvRecord(
        source=source.name, owner=item.owner, name=item.name, sha=item.sha, trusted=source.trusted,
        status="pending", indexed_at=now, tags=[], likes=0,
    )
    _refresh(env, item)
    return env


def _refresh(env: EnvRecord, item: SourceEnv) -> bool:
    """Copy the cheap fields; returns whether any changed."""
    changed = False
    for name in _CHEAP_FIELDS:
        value = getattr(item, name)
        if getattr(env, name) != value:
            setattr(env, name, value)
            changed = True
    text = search_text(item.owner, item.name, item.title, item.description, item.tags)
    if env.search_text != text:
        env.search_text = text
        changed = True
    return changed
