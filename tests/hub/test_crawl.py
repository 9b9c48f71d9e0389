"""The crawl of the Hugging Face Hub (issue 49, item 3), against the stand-in over real HTTP through
the real huggingface_hub: paged by the `Link` header, the Hub's 429 with Retry-After waited out
within OPENENV_HUB_HF_CRAWL_WAIT_MAX_S (and the crawl stopped past it), resumed at the page it
stopped on, and a re-index that writes only what changed. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.errors import SourceError
from hub_service.indexer.crawl_models import CrawlPage, SourceCrawl
from hub_service.indexer.hf_pages import retry_after_s
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import HfSource
from hub_service.queue.models import Job
from tests.support.hf_hub import HubStandIn

PAGES = ("GET", "/api/{kind}")  # a listing page served
REFUSED = ("GET", "/api/spaces")  # a listing request the throttle refused (it never reached a route)
SPACES = 230  # five pages of 50


def _seed(hub: HubStandIn) -> None:
    hub.state.page_size = 50
    hub.create_spaces({"repo_id": f"org{i % 3}/env_{i:03d}", "tags": ["openenv"], "likes": i} for i in range(SPACES))
    hub.reset_requests()


def _counts(factory: sessionmaker[Session]) -> tuple[int, int, int, int]:
    """(envs, gone envs, versions, jobs)."""
    with factory() as s:
        return (
            s.scalar(select(func.count()).select_from(EnvRecord)) or 0,
            s.scalar(select(func.count()).select_from(EnvRecord).where(EnvRecord.gone.is_(True))) or 0,
            s.scalar(select(func.count()).select_from(EnvVersion)) or 0,
            s.scalar(select(func.count()).select_from(Job)) or 0,
        )


def test_a_429_with_retry_after_is_waited_out_and_the_crawl_goes_on(hf_hub: HubStandIn, clean_factory) -> None:
    _seed(hf_hub)
    hf_hub.throttle("/api/spaces", after=2, times=2, retry_after=1)  # pages 1, 2; then two 429s; then the rest
    started = time.monotonic()
    report = index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token, wait_max_s=10))
    assert time.monotonic() - started >= 2  # it waited as Retry-After said, twice
    assert (report.pages, report.new, report.jobs, report.stopped, report.resumed) == (5, SPACES, SPACES, None, False)
    assert hf_hub.request_count(*REFUSED) == 2 and hf_hub.request_count(*PAGES) == 5
    assert _counts(clean_factory) == (SPACES, 0, SPACES, SPACES)


def test_a_wait_past_the_setting_stops_the_crawl_which_resumes_at_that_page(hf_hub: HubStandIn, clean_factory) -> None:
    _seed(hf_hub)
    source = HfSource(hf_hub.url, hf_hub.token, wait_max_s=5)
    index_source(clean_factory, source)  # a catalog to begin with; then one Space goes
    hf_hub.store.delete("space", "org2/env_002")
    hf_hub.reset_requests()
    hf_hub.throttle("/api/spaces", after=2, times=1, retry_after=3600)
    started = time.monotonic()
    stopped = index_source(clean_factory, source)
    assert time.monotonic() - started < 60  # it did not sit out the hour
    assert stopped.pages == 2 and stopped.stopped is not None
    assert "3600" in stopped.stopped and "OPENENV_HUB_HF_CRAWL_WAIT_MAX_S=5" in stopped.stopped
    assert "resumes at this page" in stopped.stopped
    assert _counts(clean_factory)[1] == 0  # nothing is gone before the crawl has listed everything
    with clean_factory() as s:
        run = s.scalar(select(SourceCrawl).where(SourceCrawl.finished_at.is_(None)))
        assert run is not None and run.pages == 2 and run.next_url and "cursor=100" in run.next_url
        assert run.stopped == stopped.stopped

    hf_hub.reset_requests()
    resumed = index_source(clean_factory, source)
    assert resumed.resumed and resumed.stopped is None
    assert resumed.pages == 3 == hf_hub.request_count(*PAGES)  # pages 3 to 5 only
    assert resumed.gone == 1 and _counts(clean_factory) == (SPACES, 1, SPACES, SPACES)
    with clean_factory() as s:
        assert s.scalar(select(EnvRecord.gone).where(EnvRecord.name == "env_002"))
        assert s.scalar(select(func.count()).select_from(CrawlPage)) == 0  # a finished crawl keeps no pages
        assert s.scalar(select(func.count()).select_from(SourceCrawl).where(SourceCrawl.finished_at.is_(None))) == 0

    fresh = index_source(clean_factory, source)  # the next crawl starts at the first page
    assert (fresh.pages, fresh.resumed, fresh.jobs, fresh.gone) == (5, False, 0, 0)


def test_waits_end_the_crawl_stops_when_its_wait_budget_is_spent(hf_hub: HubStandIn, clean_factory) -> None:
    _seed(hf_hub)
    hf_hub.throttle("/api/spaces", after=1, times=1000, retry_after=1)  # the Hub never lets up
    started = time.monotonic()
    report = index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token, wait_max_s=3))
    assert time.monotonic() - started < 60
    # three waits of a second fit the budget of 3 s; the fourth does not
    assert hf_hub.request_count(*REFUSED) == 4 and report.pages == 1
    assert report.stopped is not None and "OPENENV_HUB_HF_CRAWL_WAIT_MAX_S=3" in report.stopped
    assert _counts(clean_factory)[0] == 50


def test_a_failed_page_is_resumed_and_a_page_the_hub_forgot_starts_over(hf_hub: HubStandIn, clean_factory) -> None:
    _seed(hf_hub)
    source = HfSource(hf_hub.url, hf_hub.token, wait_max_s=5)
    hf_hub.throttle("/api/spaces", after=3, times=1, retry_after=1, status=500)  # 500 is not "wait": the pass fails
    with pytest.raises(SourceError, match="500"):
        index_source(clean_factory, source)
    assert _counts(clean_factory)[0] == 150  # three pages indexed and kept
    hf_hub.reset_requests()
    resumed = index_source(clean_factory, source)
    assert (resumed.resumed, resumed.pages, resumed.new) == (True, 2, SPACES - 150)
    assert hf_hub.request_count(*PAGES) == 2

    # A crawl stopped at page 3 whose page link the Hub no longer takes (400) starts over.
    hf_hub.throttle("/api/spaces", after=2, times=1, retry_after=3600)
    assert index_source(clean_factory, source).stopped is not None
    hf_hub.throttle("/api/spaces", after=0, times=1, retry_after=1, status=400)
    hf_hub.reset_requests()
    again = index_source(clean_factory, source)
    assert (again.pages, again.stopped, again.gone) == (5, None, 0)
    assert hf_hub.request_count(*REFUSED) == 1 and hf_hub.request_count(*PAGES) == 5
    with clean_factory() as s:
        notes = s.scalars(select(SourceCrawl.stopped).where(SourceCrawl.stopped.is_not(None))).all()
        assert any(n.startswith("abandoned: the Hub refused the listing page") and "cursor=100" in n for n in notes)


@contextmanager
def _writes(engine: Engine) -> Iterator[dict[str, int]]:
    """Rows written per (verb, table) while the block runs, from the statements the engine sends."""
    rows: dict[str, int] = {}

    def count(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        words = statement.split()
        verb = words[0].upper() if words else ""
        if verb in ("INSERT", "UPDATE", "DELETE"):
            table = (words[2] if verb in ("INSERT", "DELETE") else words[1]).strip('"')
            key = f"{verb} {table}"
            rows[key] = rows.get(key, 0) + (len(parameters) if executemany else 1)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield rows
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_a_reindex_writes_only_what_changed(hf_hub: HubStandIn, clean_factory, engine: Engine) -> None:
    _seed(hf_hub)
    source = HfSource(hf_hub.url, hf_hub.token)
    index_source(clean_factory, source)
    with _writes(engine) as quiet:
        same = index_source(clean_factory, source)
    assert (same.unchanged, same.refreshed, same.jobs) == (SPACES, 0, 0)
    assert not any(k.endswith((" environments", " env_versions", " jobs", " env_events")) for k in quiet), quiet

    hf_hub.commit("org0/env_000", {"NEW.md": "changed"})
    hf_hub.commit("org1/env_100", {"NEW.md": "changed"})
    hf_hub.set_runtime("org2/env_005", stage="BUILDING")
    before = _counts(clean_factory)
    with _writes(engine) as written:
        changed = index_source(clean_factory, source)
    assert (changed.changed, changed.refreshed, changed.jobs) == (2, 1, 2)
    assert written.get("UPDATE environments") == 3, written  # the two new revisions and the new stage
    assert _counts(clean_factory) == (before[0], 0, before[2] + 2, before[3] + 2)


def _age(hub: HubStandIn, days: int = 1) -> None:
    """Make every Space last modified `days` ago, as most of a real Hub's Spaces were."""
    import datetime as dt

    when = (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).isoformat(timespec="milliseconds")
    for repo in list(hub.store.repos.values()):
        repo.last_modified = when.replace("+00:00", "Z")


def test_an_incremental_pass_reads_the_newest_page_and_a_full_crawl_finds_what_is_gone(
    hf_hub: HubStandIn, clean_factory
) -> None:
    _seed(hf_hub)
    _age(hf_hub)
    source = HfSource(hf_hub.url, hf_hub.token)
    first = index_source(clean_factory, source, full_every_s=3600)
    assert (first.mode, first.pages, first.new) == ("full", 5, SPACES)  # no complete pass yet: a full crawl

    hf_hub.commit("org0/env_000", {"NEW.md": "changed"})
    hf_hub.commit("org1/env_100", {"NEW.md": "changed"})
    hf_hub.create_space("org9/brand_new", tags=["openenv"])
    hf_hub.set_runtime("org2/env_200", stage="BUILDING")  # no commit, on page 5: left to the next full crawl
    hf_hub.store.delete("space", "org1/env_004")  # a listing cannot say: left to the next full crawl
    hf_hub.reset_requests()
    changes = index_source(clean_factory, source, full_every_s=3600)
    assert changes.mode == "changes" and changes.pages == 1 == hf_hub.request_count(*PAGES)
    assert (changes.new, changes.changed, changes.jobs, changes.gone) == (1, 2, 3, 0)
    assert _counts(clean_factory) == (SPACES + 1, 0, SPACES + 3, SPACES + 3)
    with clean_factory() as s:
        assert s.scalar(select(EnvRecord.stage).where(EnvRecord.name == "env_200")) == "RUNNING"

    again = index_source(clean_factory, source, full_every_s=3600)  # nothing new since the last pass
    assert (again.mode, again.pages, again.new, again.changed, again.jobs) == ("changes", 1, 0, 0, 0)

    full = index_source(clean_factory, source, full_every_s=0)  # the full crawl is due
    assert (full.mode, full.pages, full.gone, full.refreshed, full.jobs) == ("full", 5, 1, 1, 0)
    with clean_factory() as s:
        gone = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_004"))
        assert gone is not None and gone.gone
        assert s.scalar(select(EnvRecord.stage).where(EnvRecord.name == "env_200")) == "BUILDING"


def test_the_reconcile_is_incremental_between_full_crawls_as_its_setting_says(
    hf_hub: HubStandIn, clean_factory, hub_settings
) -> None:
    from pydantic import SecretStr

    from hub_service.serve import index_all

    _seed(hf_hub)
    _age(hf_hub)
    hf = {"hf_enabled": True, "hf_endpoint": hf_hub.url, "hf_token": SecretStr(hf_hub.token), "local_source": None}
    every = hub_settings.model_copy(update={**hf, "hf_full_crawl_every_s": 3600.0})
    assert [(r.mode, r.pages) for r in index_all(every)] == [("full", 5)]
    hf_hub.commit("org0/env_000", {"NEW.md": "changed"})
    assert [(r.mode, r.pages, r.changed) for r in index_all(every)] == [("changes", 1, 1)]
    always = hub_settings.model_copy(update=hf)  # the default, 0: every pass is a full crawl
    assert [(r.mode, r.pages) for r in index_all(always)] == [("full", 5)]


def test_retry_after_reads_seconds_dates_and_the_ratelimit_header() -> None:
    import datetime as dt

    now = dt.datetime(2026, 12, 7, 12, 0, 0, tzinfo=dt.UTC)
    assert retry_after_s({"retry-after": "7"}) == 7
    assert retry_after_s({"retry-after": "Mon, 07 Dec 2026 12:00:30 GMT"}, now=now) == 30
    assert retry_after_s({"ratelimit": '"api";r=0;t=55'}) == 55
    assert retry_after_s({"ratelimit": '"api";r=3;t=55'}) is None and retry_after_s({}) is None
