"""The progress of a paged crawl, kept in the database so that a crawl the Hub stopped (a 429 asking
for a longer wait than allowed), or that a failure or a restart cut short, resumes at the page it
stopped on: `SourceCrawl` holds where it is, `CrawlPage` what each indexed page listed (whom a
finished crawl did not see is gone) and corrected (the drift record). An incremental pass (newest
first, down to where the last complete pass began) is kept as a finished row of `<source>:changes`,
so that the next one knows where to stop. The indexing itself is indexer/service.py's."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from hub_service.db import utcnow
from hub_service.indexer.crawl_models import CrawlPage, SourceCrawl

__all__ = [
    "abandon",
    "finish",
    "last_complete",
    "note_changes",
    "note_page",
    "open_crawl",
    "so_far",
    "stop",
    "unfinished",
]

_KEEP = 20  # finished crawls kept per source (when each ran, how it ended)


def open_crawl(session: Session, source: str) -> SourceCrawl:
    """The unfinished crawl of `source` (to resume), else a new one."""
    run = session.scalar(
        select(SourceCrawl)
        .where(SourceCrawl.source == source, SourceCrawl.finished_at.is_(None))
        .order_by(SourceCrawl.id.desc())
        .limit(1)
    )
    if run is None:
        run = SourceCrawl(source=source, started_at=utcnow(), pages=0)
        session.add(run)
        session.flush()
    return run


def so_far(session: Session, crawl_id: int) -> tuple[set[tuple[str, str]], list[str]]:
    """The (owner, name) of every env the crawl's indexed pages listed, and their corrections."""
    seen: set[tuple[str, str]] = set()
    corrections: list[str] = []
    for listed, corrected in session.execute(
        select(CrawlPage.listed, CrawlPage.corrections).where(CrawlPage.crawl_id == crawl_id).order_by(CrawlPage.number)
    ):
        seen.update(_key(repo_id) for repo_id in listed)
        corrections += corrected
    return seen, corrections


def note_page(
    session: Session, crawl_id: int, listed: set[tuple[str, str]], corrections: list[str], next_url: str | None
) -> None:
    """Record an indexed page, in the transaction that indexed it: the crawl resumes after it."""
    run = session.get(SourceCrawl, crawl_id)
    assert run is not None, f"crawl {crawl_id} is gone"
    run.pages += 1
    run.next_url = next_url
    run.stopped = None
    names = sorted(f"{owner}/{name}" for owner, name in listed)
    session.add(CrawlPage(crawl_id=crawl_id, number=run.pages, listed=names, corrections=corrections))


def stop(session: Session, crawl_id: int, why: str) -> None:
    """Note why the crawl stopped before its end (it resumes at its `next_url` next time)."""
    run = session.get(SourceCrawl, crawl_id)
    if run is not None:
        run.stopped = why[:2000]


def finish(session: Session, crawl_id: int, why: str | None = None) -> None:
    """End the crawl (its pages are no longer needed); older finished crawls past the last few go."""
    run = session.get(SourceCrawl, crawl_id)
    if run is None:
        return
    run.finished_at, run.next_url = utcnow(), None
    if why is not None:
        run.stopped = why[:2000]
    session.execute(delete(CrawlPage).where(CrawlPage.crawl_id == crawl_id))
    _prune(session, run.source)


def _prune(session: Session, source: str) -> None:
    """Drop the finished crawls of `source` past the last few."""
    old = session.scalars(
        select(SourceCrawl.id)
        .where(SourceCrawl.source == source, SourceCrawl.finished_at.is_not(None))
        .order_by(SourceCrawl.id.desc())
        .offset(_KEEP)
    ).all()
    if old:
        session.execute(delete(CrawlPage).where(CrawlPage.crawl_id.in_(old)))
        session.execute(delete(SourceCrawl).where(SourceCrawl.id.in_(old)))


def unfinished(session: Session, source: str) -> bool:
    """Whether a full crawl of `source` stopped before its end (the next full pass resumes it)."""
    return (
        session.scalar(
            select(SourceCrawl.id).where(SourceCrawl.source == source, SourceCrawl.finished_at.is_(None)).limit(1)
        )
        is not None
    )


def last_complete(session: Session, source: str) -> tuple[dt.datetime | None, dt.datetime | None]:
    """When the last complete full crawl of `source` began, and when the last complete pass of any
    kind (full or incremental) began; None for none. A crawl that was abandoned is not complete."""
    complete = (
        SourceCrawl.finished_at.is_not(None),
        or_(SourceCrawl.stopped.is_(None), ~SourceCrawl.stopped.like("abandoned:%")),
    )
    full = session.scalar(select(func.max(SourceCrawl.started_at)).where(SourceCrawl.source == source, *complete))
    changes = session.scalar(
        select(func.max(SourceCrawl.started_at)).where(SourceCrawl.source == changes_name(source), *complete)
    )
    any_kind = max((_aware(t) for t in (full, changes) if t is not None), default=None)
    return (_aware(full) if full is not None else None), any_kind


def note_changes(session: Session, source: str, started_at: dt.datetime, pages: int) -> None:
    """Record a complete incremental pass of `source` that began at `started_at`."""
    session.add(SourceCrawl(source=changes_name(source), started_at=started_at, finished_at=utcnow(), pages=pages))
    session.flush()
    _prune(session, changes_name(source))


def changes_name(source: str) -> str:
    """The `SourceCrawl.source` of `source`'s incremental passes."""
    return f"{source}:changes"


def _aware(when: dt.datetime) -> dt.datetime:
    """A stored time as UTC (SQLite gives it back without its zone)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def abandon(session: Session, crawl_id: int, why: str) -> None:
    """Give up a crawl that cannot resume (the source no longer knows its page); a new one starts."""
    finish(session, crawl_id, f"abandoned: {why}")


def _key(repo_id: str) -> tuple[str, str]:
    owner, _, name = repo_id.partition("/")
    return owner, name
