"""Incremental indexing: bring the catalog in line with what a source has now.

An unchanged sha does no work beyond refreshing cheap fields (likes, stage, URL); a new or changed
sha gets a version row and a pipeline job; an env the source no longer lists is marked gone —
never deleted — and comes back if it reappears.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service import lifecycle
from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope, utcnow
from hub_service.indexer.clean import Rejected, clean
from hub_service.indexer.drift import CORRECTIONS, note_drift
from hub_service.indexer.sources import Source, SourceEnv
from hub_service.queue.models import Job

__all__ = ["IndexReport", "index_one", "index_source", "search_text"]

log = logging.getLogger("hub_service.indexer")

_CHEAP_FIELDS = (
    "tags",
    "likes",
    "private",
    "stage",
    "subdomain",
    "host",
    "title",
    "description",
    "last_modified",
    "location",
)


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
    # "owner/name: why" for each Space left out of this pass (its card or listing cannot be stored)
    rejected: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def search_text(owner: str, name: str, title: str | None, description: str | None, tags: list[str]) -> str:
    """What text search matches against: names, title, description, and `#tag ` tokens."""
    words = " ".join(
        x for x in (f"{owner}/{name}", name.replace("_", " "), title or "", description or "") if x
    ).lower()
    return words + " " + "".join(f"#{t.lower()} " for t in tags)


def index_source(
    factory: sessionmaker[Session], source: Source, max_attempts: int = 3, priority: int = 100, cause: str | None = None
) -> IndexReport:
    """Index everything `source` lists; returns what changed. One transaction for the whole pass."""
    start = time.monotonic()
    report = IndexReport(source=source.name)
    cause = cause or f"{source.name} crawl"
    listed = list(source.list())  # read the source before touching the database
    now = utcnow()
    with session_scope(factory) as session:
        existing = {
            (e.owner, e.name): e for e in session.scalars(select(EnvRecord).where(EnvRecord.source == source.name))
        }
        seen: set[tuple[str, str]] = set()
        to_version: list[tuple[EnvRecord, str]] = []
        events: list[_Event] = []
        for raw in listed:
            if not raw.sha:
                continue  # nothing to index yet (a Space with no commit)
            item = _checked(raw, report)
            if item is None:
                if isinstance(raw.owner, str) and isinstance(raw.name, str):
                    seen.add((raw.owner, raw.name))  # still listed: an env the catalog has is not gone
                continue
            key = (item.owner, item.name)
            if key in seen:
                continue
            seen.add(key)
            _apply(session, source, existing.get(key), item, now, report, to_version, events)
        for key, env in existing.items():
            if key not in seen and not env.gone:
                _mark_gone(env, now, report, events)
        session.flush()  # ids for the new envs
        _record(session, events, cause)
        report.jobs = _enqueue(session, to_version, max_attempts, priority)
        if source.name == "hf":  # what webhooks should have brought: drift (a local folder sends none)
            corrections = [f"{env.repo_id}: {kind}" for env, kind, _, _ in events if kind in CORRECTIONS]
            note_drift(session, source.name, report.seen, corrections)
    report.seconds = round(time.monotonic() - start, 3)
    log.info("indexed %s: %s", source.name, report.as_dict())
    return report


def index_one(
    factory: sessionmaker[Session],
    source: Source,
    owner: str,
    name: str,
    item: SourceEnv | None,
    *,
    max_attempts: int = 3,
    priority: int = 50,
    cause: str,
) -> IndexReport:
    """Index one env as `source` describes it now (`item`; None when the source no longer has it:
    deleted, private, or untagged). The same rules as a full pass, for one key."""
    report = IndexReport(source=source.name)
    now = utcnow()
    with session_scope(factory) as session:
        env = session.scalar(
            select(EnvRecord).where(EnvRecord.source == source.name, EnvRecord.owner == owner, EnvRecord.name == name)
        )
        to_version: list[tuple[EnvRecord, str]] = []
        events: list[_Event] = []
        checked = _checked(item, report) if item is not None and item.sha else None
        if item is None or not item.sha:
            if env is not None and not env.gone:
                _mark_gone(env, now, report, events)
        elif checked is not None:
            _apply(session, source, env, checked, now, report, to_version, events)
        session.flush()
        _record(session, events, cause)
        report.jobs = _enqueue(session, to_version, max_attempts, priority)
    return report


def _checked(item: SourceEnv, report: IndexReport) -> SourceEnv | None:
    """`item` made safe to store, or None (noted in the report and the log) when it cannot be."""
    try:
        return clean(item)
    except Rejected as exc:
        why = f"{str(item.owner)[:100]}/{str(item.name)[:100]}: {exc}"
        report.rejected.append(why)
        log.warning("left out of the index: %s", why)
        return None


# (env, kind, summary, details): audit events, recorded once new envs have ids
_Event = tuple[EnvRecord, str, str, dict[str, Any]]


def _apply(
    session: Session,
    source: Source,
    env: EnvRecord | None,
    item: SourceEnv,
    now: dt.datetime,
    report: IndexReport,
    to_version: list[tuple[EnvRecord, str]],
    events: list[_Event],
) -> None:
    """Bring one env in line with `item`: create it, note a new sha, or refresh cheap fields."""
    report.seen += 1
    if env is None:
        env = _new_env(source, item, now)
        session.add(env)
        report.new += 1
        to_version.append((env, item.sha))
        events.append((env, "indexed", f"indexed from {source.name} at {item.sha[:12]}", {"sha": item.sha}))
        return
    if env.gone:
        env.gone, env.gone_at = False, None
        report.returned += 1
        events.append((env, "returned", f"{env.repo_id} is listed by {source.name} again", {}))
    if env.sha != item.sha:
        report.changed += 1
        events.append(
            (
                env,
                "revision",
                f"main moved from {str(env.sha)[:12]} to {item.sha[:12]}",
                {"old_sha": env.sha, "new_sha": item.sha},
            )
        )
        env.sha, env.indexed_at = item.sha, now
        _refresh(env, item)
        to_version.append((env, item.sha))
    else:
        report.unchanged += 1
        if _refresh(env, item):
            report.refreshed += 1


def _mark_gone(env: EnvRecord, now: dt.datetime, report: IndexReport, events: list[_Event]) -> None:
    env.gone, env.gone_at = True, now
    report.gone += 1
    events.append((env, "gone", f"{env.repo_id} is no longer listed by {env.source}", {}))


def _record(session: Session, events: list[_Event], cause: str) -> None:
    for env, kind, summary, details in events:
        record(session, env, kind, summary, cause=cause, **details)


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
    again = 0
    for env, sha in pairs:
        version = known.get((env.id, sha))
        if version is not None:
            version.ref = "main"  # a pull request's head that is now main's (a fast-forward merge)
            if version.state in (VersionState.PASSED, VersionState.FAILED):
                apply_verdict(env, version)
            if version.state != VersionState.CANCELLED:
                continue  # finished, or queued or running: its job exists already
            # checked for a pull request that closed before it finished: main needs its verdict
            lifecycle.move(session, env, version, VersionState.QUEUED, cause=f"{sha[:12]} is main's revision now")
            session.add(Job(version_id=version.id, max_attempts=max_attempts, priority=priority))
            again += 1
            continue
        fresh.append(EnvVersion(env_id=env.id, sha=sha, ref="main", state=VersionState.QUEUED))
    session.add_all(fresh)
    session.flush()
    session.add_all([Job(version_id=v.id, max_attempts=max_attempts, priority=priority) for v in fresh])
    return len(fresh) + again


def _new_env(source: Source, item: SourceEnv, now: dt.datetime) -> EnvRecord:
    env = EnvRecord(
        source=source.name,
        owner=item.owner,
        name=item.name,
        sha=item.sha,
        trusted=source.trusted,
        status="pending",
        indexed_at=now,
        tags=[],
        likes=0,
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
    if item.manifest_text is not None and env.manifest_text != item.manifest_text:
        env.manifest_text = item.manifest_text  # else the pipeline sets it from the manifest it validated
        changed = True
    return changed
