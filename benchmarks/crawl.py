"""The crawl of the Hugging Face Hub at its size (issue 49, item 3):

    python benchmarks/crawl.py [--spaces 50000] [--changes 100] [--page-size 1000] [--output PATH | --no-save] [--json]

A local Hugging Face Hub stand-in (tests/support/hf_hub, real HTTP on 127.0.0.1) is seeded with N
Spaces tagged openenv, last modified over the past days as a real Hub's are. The Hub's indexer
(hub_service/indexer, through the real huggingface_hub client) then makes, on SQLite:

- a full crawl of all N (wall time, listing pages, jobs queued), once the stand-in has built its
  listing (untimed: the real Hub serves its pages from a database);
- an incremental re-index after C Spaces got a new commit (wall time, pages read, revisions found:
  all C must be found, each with a pipeline job, or the benchmark fails).

Targets (issue 49): a full crawl of 50,000 in <= 60 s; an incremental re-index with 100 changes in
<= 2 s. Results: benchmarks/results/crawl.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import BenchmarkError, entry

NAME = "crawl"
TARGETS = {"full_crawl_s": 60.0, "changes_s": 2.0}


def _iso(when: dt.datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seed(hub: Any, spaces: int) -> None:
    """N Spaces, the oldest modified N minutes ago, one a minute since (all before the crawl)."""
    now = dt.datetime.now(dt.UTC)
    with hub.store.batch():
        for i in range(spaces):
            repo = hub.create_space(
                f"org{i % 97}/env_{i:05d}",
                tags=["openenv", ("games", "coding", "chess", "tools")[i % 4]],
                likes=(i * 37) % 500,
                stage=("RUNNING", "SLEEPING", "BUILDING")[i % 3],
            )
            repo.last_modified = _iso(now - dt.timedelta(minutes=spaces - i + 10))


def run(work: Path, spaces: int, changes: int, page_size: int) -> dict[str, Any]:
    """Seed, crawl in full, change `changes` Spaces, re-index incrementally; the numbers."""
    from sqlalchemy import func, select

    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from hub_service.indexer.sources import HfSource
    from hub_service.queue.models import Job
    from tests.support.hf_hub import HubStandIn

    if not 0 < changes <= spaces:
        raise BenchmarkError(f"--changes must be between 1 and --spaces ({spaces}), not {changes}")
    hub = HubStandIn(work / "hf", page_size=page_size)
    hub.start()
    try:
        t0 = time.monotonic()
        seed(hub, spaces)
        seed_s = time.monotonic() - t0
        url = f"sqlite:///{work / 'hub.sqlite3'}"
        migrate(url)
        engine = make_engine(url)
        factory = sessionmaker_for(engine)
        source = HfSource(hub.url, hub.token)
        # The stand-in builds its listing once (its cost, not the crawler's: the Hub serves pages from
        # its database); asked for the first page here, untimed, it has it before the crawl starts.
        t0 = time.monotonic()
        next(iter(source.pages()))
        listing_s = time.monotonic() - t0
        hub.reset_requests()
        t0 = time.monotonic()
        full = index_source(factory, source, full_every_s=3600)
        full_s = time.monotonic() - t0
        if full.mode != "full" or full.new != spaces or full.stopped:
            raise BenchmarkError(f"the full crawl indexed {full.new} of {spaces} Spaces: {full.as_dict()}")
        full_requests = hub.request_count()

        step = max(1, spaces // changes)  # spread over the listing, old and new alike
        for n in range(changes):
            hub.commit(f"org{(n * step) % 97}/env_{n * step:05d}", {"CHANGED.md": f"change {n}"})
        hub.reset_requests()
        t0 = time.monotonic()
        inc = index_source(factory, source, full_every_s=3600)
        inc_s = time.monotonic() - t0
        with factory() as session:
            jobs = session.scalar(select(func.count()).select_from(Job)) or 0
        engine.dispose()
        if inc.mode != "changes" or inc.changed != changes or inc.jobs != changes or jobs != spaces + changes:
            raise BenchmarkError(f"the incremental pass found {inc.changed} of {changes} changes: {inc.as_dict()}")
        return {
            "spaces": spaces,
            "page_size": page_size,
            "database": "sqlite",
            "seed_s": round(seed_s, 2),
            "stand_in_listing_s": round(listing_s, 2),
            "full_crawl_s": round(full_s, 2),
            "full_crawl_pages": full.pages,
            "full_crawl_requests": full_requests,
            "full_crawl_jobs": full.jobs,
            "changes": changes,
            "changes_s": round(inc_s, 3),
            "changes_pages": inc.pages,
            "changes_requests": hub.request_count(),
            "changes_found": inc.changed,
            "changes_jobs": inc.jobs,
            "page_budget": math.ceil(spaces / page_size),
            "targets": TARGETS,
        }
    finally:
        hub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spaces", type=int, default=50_000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--page-size", type=int, default=1000, help="items per listing page (the Hub's is 1000)")
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    from openenv.server.run import uvicorn_options

    server_loop = uvicorn_options()["loop"]  # what the stand-in's uvicorn thread runs on
    work = Path(tempfile.mkdtemp(prefix="openenv-crawl-bench-"))
    try:
        report = run(work, args.spaces, args.changes, args.page_size)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = _results.save(NAME, args, report, {"HF stand-in": {"client": None, "server": server_loop}})
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    r = report
    print(
        f"full crawl of {r['spaces']} Spaces (page {r['page_size']}): {r['full_crawl_s']} s, {r['full_crawl_pages']} pages, "
        f"{r['full_crawl_jobs']} jobs (target <= {TARGETS['full_crawl_s']:g} s)"
    )
    print(
        f"incremental re-index with {r['changes']} changes: {r['changes_s']} s, {r['changes_pages']} pages, "
        f"{r['changes_found']} found (target <= {TARGETS['changes_s']:g} s)"
    )


if __name__ == "__main__":
    entry(main)
