"""Where a paged crawl of a source is: the crawl (started, finished, the page it resumes at) and the
pages it has indexed (whom each listed, what each corrected), kept until the crawl finishes."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["CrawlPage", "SourceCrawl"]


class SourceCrawl(Base):
    """One crawl of a paged source; unfinished (`finished_at` NULL) it is resumed at `next_url`."""

    __tablename__ = "source_crawls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(16), index=True)
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    # the page to read next: NULL before the first page and after the last
    next_url: Mapped[str | None] = mapped_column(Text, default=None)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    stopped: Mapped[str | None] = mapped_column(Text, default=None)  # why it last stopped before its end


class CrawlPage(Base):
    """A page the crawl indexed: its envs ("owner/name") and the corrections it made ("owner/name: kind")."""

    __tablename__ = "crawl_pages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    crawl_id: Mapped[int] = mapped_column(ForeignKey("source_crawls.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    listed: Mapped[list[str]] = mapped_column(default=list)
    corrections: Mapped[list[str]] = mapped_column(default=list)
