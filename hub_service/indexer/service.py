"""Incremental indexing: bring the catalog in line with what a source has now.

An unchanged sha does no work beyond refreshing cheap fields (likes, stage, URL); a new or changed
sha gets a version row and a pipeline job; an env the source no longer lists is marked gone —
never deleted — and comes back if it reappears.

A paged source (the Hugging Face Hub) has two kinds of pass. A full crawl reads every page: it
refreshes every cheap field and is the only pass that finds what is gone (deleted, made private,
untagged, renamed), since a listing cannot list what it no longer has. An incremental pass
(`full_every_s`) reads the listing newest first (by `lastModified`) and stops at the first page that
reaches back past the start of the last complete pass (less `_CLOCK_SKEW_S`): everything changed
since is on the pages before. It does not stop at the first Space it already has at that sha: a
Space committed while the last pass ran, after that pass had read it, sorts below Spaces the pass
read later, and would be missed. What changes no commit (likes, a Space's stage) waits for the next
full crawl (or its webhook).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session, sessionmaker

from hub_service import lifecycle
from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope, utcnow
from hub_service.indexer import crawl
from hub_service.indexer.clean import Rejected, clean
from hub_service.indexer.drift import CORRECTIONS, note_drift
from hub_service.indexer.hf_pages import CrawlPaused, ListingRefused
from hub_service.indexer.sources import Page, PagedSource, Source, SourceEnv
from hub_service.queue.models import Job

__all__ = ["IndexReport", "index_one", "index_source", "search_text"]

log = logging.getLogger("hub_service.indexer")

# How far the Hub's clock (`lastModified`) may be behind ours: an incremental pass reads this much further back.
_CLOCK_SKEW_S = 300.0

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
    pages: int = 0  # pages a paged source's crawl indexed in this pass
    resumed: bool = False  # it went on from where an earlier crawl stopped
    stopped: str | None = None  # why the crawl stopped before its end (it resumes there next time)
    mode: str = "full"  # "full": every page; "changes": newest first, down to the last complete pass
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
    factory: sessionmaker[Session],
    source: Source,
    max_attempts: int = 3,
    priority: int = 100,
    cause: str | None = None,
    full_every_s: float | None = None,
) -> IndexReport:
    """Index everything `source` lists; returns what changed. A paged source (the Hugging Face Hub)
    is crawled a page per transaction, resumed where its last crawl stopped (`report.stopped` says
    why this one stopped early, when it did); any other in one transaction for the whole pass.

    With `full_every_s`, a paged source gets an incremental pass (`report.mode == "changes"`: only
    what was committed since the last complete pass) while its last complete full crawl began less
    than that many seconds ago and no crawl waits to be resumed; else a full crawl, which alone
    finds what is gone."""
    start = time.monotonic()
    report = IndexReport(source=source.name)
    cause = cause or f"{source.name} crawl"
    if isinstance(source, PagedSource):
        since = _changes_since(factory, source, full_every_s)
        if since is not None:
            report.mode = "changes"
            _changes(factory, source, report, _Queue(max_attempts, priority, cause), since)
        else:
            _crawl(factory, source, report, _Queue(max_attempts, priority, cause))
    else:
        _index_listing(factory, source, report, _Queue(max_attempts, priority, cause))
    report.seconds = round(time.monotonic() - start, 3)
    log.info("indexed %s: %s", source.name, report.as_dict())
    return report


@dataclass(frozen=True)
class _Queue:
    """How the pass queues the revisions it finds, and the cause its audit events name."""

    max_attempts: int
    priority: int
    cause: str


def _index_listing(factory: sessionmaker[Session], source: Source, report: IndexReport, queue: _Queue) -> None:
    listed = list(source.list())  # read the source before touching the database
    now = utcnow()
    with session_scope(factory) as session:
        existing = {
            (e.owner, e.name): e for e in session.scalars(select(EnvRecord).where(EnvRecord.source == source.name))
        }
        seen: set[tuple[str, str]] = set()
        to_version: list[tuple[EnvRecord, str]] = []
        events: list[_Event] = []
        _take(session, source, listed, existing, seen, now, report, to_version, events)
        for key, env in existing.items():
            if key not in seen and not env.gone:
                _mark_gone(env, now, report, events)
        _settle(session, events, to_version, queue, report)
        if source.name == "hf":  # what webhooks should have brought: drift (a local folder sends none)
            note_drift(session, source.name, report.seen, _corrections(events))


def _crawl(
    factory: sessionmaker[Session], source: PagedSource, report: IndexReport, queue: _Queue, again: bool = True
) -> None:
    """Crawl `source` page by page from where its last crawl stopped; at the end, what it did not
    list is gone (once the source confirms it)."""
    with session_scope(factory) as session:
        run = crawl.open_crawl(session, source.name)
        crawl_id, resume_url, listed_all = run.id, run.next_url, run.pages > 0 and run.next_url is None
        seen, _ = crawl.so_far(session, crawl_id)
    report.resumed = run.pages > 0
    if not listed_all:
        try:
            for page in source.pages(resume_url):
                _index_page(factory, source, crawl_id, page, seen, report, queue)
        except CrawlPaused as exc:
            with session_scope(factory) as session:
                crawl.stop(session, crawl_id, str(exc))
            report.stopped = exc.message
            log.warning("the %s crawl stopped at page %d: %s", source.name, run.pages + report.pages + 1, exc)
            return
        except ListingRefused as exc:
            if not (again and resume_url and report.pages == 0):
                raise
            with session_scope(factory) as session:  # the source no longer knows that page: start over
                crawl.abandon(session, crawl_id, str(exc))
            log.warning("the %s crawl cannot resume where it stopped (%s); it starts again", source.name, exc)
            _crawl(factory, source, report, queue, again=False)
            return
    _finish_crawl(factory, source, crawl_id, report, queue)


def _changes_since(
    factory: sessionmaker[Session], source: PagedSource, full_every_s: float | None
) -> dt.datetime | None:
    """When the last complete pass began, if this pass may be incremental; else None (a full crawl)."""
    if full_every_s is None:
        return None
    with factory() as session:
        if crawl.unfinished(session, source.name):
            return None  # a stopped full crawl goes on first: it alone finds what is gone
        full, latest = crawl.last_complete(session, source.name)
    if full is None or latest is None or (utcnow() - full).total_seconds() >= full_every_s:
        return None
    return latest


def _changes(
    factory: sessionmaker[Session], source: PagedSource, report: IndexReport, queue: _Queue, since: dt.datetime
) -> None:
    """Read the listing newest first down to `since` (less the clock skew), indexing each page as a
    full crawl does (nothing is marked gone); a complete pass is recorded for the next to stop at."""
    started = utcnow()
    floor = since - dt.timedelta(seconds=_CLOCK_SKEW_S)
    seen: set[tuple[str, str]] = set()
    try:
        for page in source.pages(newest_first=True):
            _index_page(factory, source, None, page, seen, report, queue)
            if any(item.last_modified is not None and _utc(item.last_modified) < floor for item in page.items):
                break  # this page reaches back past the last complete pass: nothing older changed
    except CrawlPaused as exc:  # not recorded: the next pass reads from the same point again
        report.stopped = exc.message
        log.warning("the %s incremental pass stopped at page %d: %s", source.name, report.pages + 1, exc)
        return
    with session_scope(factory) as session:
        crawl.note_changes(session, source.name, started, report.pages)


def _utc(when: dt.datetime) -> dt.datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _index_page(
    factory: sessionmaker[Session],
    source: PagedSource,
    crawl_id: int | None,
    page: Page,
    seen: set[tuple[str, str]],
    report: IndexReport,
    queue: _Queue,
) -> None:
    """Index one page in one transaction, which also records it as done (in the crawl `crawl_id`;
    None: an incremental pass, which keeps no page)."""
    now = utcnow()
    names = sorted({item.name for item in page.items if isinstance(item.name, str)})
    # whom this page lists first (as `_take` counts them: Spaces with a commit), for the crawl's record
    fresh = {
        (item.owner, item.name)
        for item in page.items
        if item.sha
        and isinstance(item.owner, str)
        and isinstance(item.name, str)
        and (item.owner, item.name) not in seen
    }
    with session_scope(factory) as session:
        existing = {
            (e.owner, e.name): e
            for e in session.scalars(
                select(EnvRecord).where(EnvRecord.source == source.name, EnvRecord.name.in_(names))
            )
        }
        to_version: list[tuple[EnvRecord, str]] = []
        events: list[_Event] = []
        _take(session, source, page.items, existing, seen, now, report, to_version, events)
        _settle(session, events, to_version, queue, report)
        if crawl_id is not None:
            crawl.note_page(session, crawl_id, fresh, _corrections(events), page.next_url)
    report.pages += 1


def _finish_crawl(
    factory: sessionmaker[Session], source: PagedSource, crawl_id: int, report: IndexReport, queue: _Queue
) -> None:
    """The end of a crawl: an env it did not list is asked for once more (a Space changed while the
    crawl ran moves in the listing's order and may be missed) and marked gone only when the source
    does not have it; the drift of the whole crawl is recorded."""
    with factory() as session:
        seen, corrections = crawl.so_far(session, crawl_id)
        missing = [
            (owner, name)
            for owner, name in session.execute(
                select(EnvRecord.owner, EnvRecord.name).where(
                    EnvRecord.source == source.name, EnvRecord.gone.is_(False)
                )
            )
            if (owner, name) not in seen
        ]
    found = {key: source.get(*key) for key in missing}  # outside any transaction: these are requests
    now = utcnow()
    with session_scope(factory) as session:
        to_version: list[tuple[EnvRecord, str]] = []
        events: list[_Event] = []
        for key, item in found.items():
            env = session.scalar(
                select(EnvRecord).where(
                    EnvRecord.source == source.name, EnvRecord.owner == key[0], EnvRecord.name == key[1]
                )
            )
            _one(session, source, env, item, now, report, to_version, events)
        _settle(session, events, to_version, queue, report)
        note_drift(session, source.name, len(seen), corrections + _corrections(events))
        crawl.finish(session, crawl_id)


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
        _one(session, source, env, item, now, report, to_version, events)
        _settle(session, events, to_version, _Queue(max_attempts, priority, cause), report)
    return report


def _one(
    session: Session,
    source: Source,
    env: EnvRecord | None,
    item: SourceEnv | None,
    now: dt.datetime,
    report: IndexReport,
    to_version: list[tuple[EnvRecord, str]],
    events: list[_Event],
) -> None:
    """Bring one env in line with `item`, or mark it gone when the source no longer has it (None)."""
    checked = _checked(item, report) if item is not None and item.sha else None
    if item is None or not item.sha:
        if env is not None and not env.gone:
            _mark_gone(env, now, report, events)
    elif checked is not None:
        _apply(session, source, env, checked, now, report, to_version, events)


def _take(
    session: Session,
    source: Source,
    listed: list[SourceEnv],
    existing: dict[tuple[str, str], EnvRecord],
    seen: set[tuple[str, str]],
    now: dt.datetime,
    report: IndexReport,
    to_version: list[tuple[EnvRecord, str]],
    events: list[_Event],
) -> None:
    """Apply what a listing (or one page of it) says, once per env (`seen` remembers whom)."""
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


def _settle(
    session: Session,
    events: list[_Event],
    to_version: list[tuple[EnvRecord, str]],
    queue: _Queue,
    report: IndexReport,
) -> None:
    """Record the pass's audit events and queue its revisions (once the new envs have ids)."""
    session.flush()
    _record(session, events, queue.cause)
    report.jobs += _enqueue(session, to_version, queue.max_attempts, queue.priority)


def _corrections(events: list[_Event]) -> list[str]:
    """What the events corrected in the catalog ("owner/name: kind"), for the drift record."""
    return [f"{env.repo_id}: {kind}" for env, kind, _, _ in events if kind in CORRECTIONS]


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
    if fresh:  # a bulk insert: a crawl of the Hub queues tens of thousands, and nothing here reads them back
        session.execute(
            insert(Job), [{"version_id": v.id, "max_attempts": max_attempts, "priority": priority} for v in fresh]
        )
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
