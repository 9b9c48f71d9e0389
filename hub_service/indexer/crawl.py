"""The progress of a paged crawl, kept in the database so that a crawl the Hub stopped (a 429 asking
for a longer wait than allowed), or that a failure or a restart cut short, resumes at the page it
stopped on: `SourceCrawl` holds where it is, `CrawlPage` what each indexed page listed (whom a
finished crawl did not see is gone) and corrected (the drift record). The indexing itself is
indexer/service.py's."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from hub_service.db import utcnow
from hub_service.indexer.crawl_models import CrawlPage, SourceCrawl

__all__ = ["abandon", "finish", "note_page", "open_crawl", "so_far", "stop"]

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
    old = session.scalars(
        select(SourceCrawl.id)
        .where(SourceCrawl.source == run.source, SourceCrawl.finished_at.is_not(None))
        .order_by(SourceCrawl.id.desc())
        .offset(_KEEP)
    ).all()
    if old:
        session.execute(delete(CrawlPage).where(CrawlPage.crawl_id.in_(old)))
        session.execute(delete(SourceCrawl).where(SourceCrawl.id.in_(old)))


def abandon(session: Session, crawl_id: int, why: str) -> None:
    """Give up a crawl that cannot resume (the source no longer knows its page); a new one starts."""
    finish(session, crawl_id, f"abandoned: {why}")


def _key(repo_id: str) -> tuple[str, str]:
    owner, _, name = repo_id.partition("/")
    return owner, name
