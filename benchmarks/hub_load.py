"""The Hub API under load: requests/s and latency at a fixed concurrency, per endpoint.

    python benchmarks/hub_load.py [--envs 5000,50000] [--databases sqlite,postgresql] [--concurrency 32]
        [--seconds 10] [--postgres-url URL] [--output PATH | --no-save] [--json]

For each catalog size and database: seeds a catalog with N environments (through the indexer, as
a crawl would), serves the Hub API the way `openenv hub serve` does (one uvicorn process; rate
limits on, every request takes its token, with a bucket large enough never to refuse), and drives
each endpoint with `wrk` (Debian's package, which `scripts/systems` installs) from a second
process on 127.0.0.1. Without wrk, a Python load generator (asyncio + httpx, same concurrency)
is used and the report says so: it is much slower than wrk, so its numbers bound the server from
below. PostgreSQL is a fresh database on the server of `--postgres-url` (default:
TEST_DATABASE_URL, which `scripts/systems` prints), dropped afterwards.

The server runs on uvloop (`_eventloop.LOOP`, explicit, checked in its process), on a port from the
OS, polled on its health endpoint; the Python load generator runs on uvloop too (wrk has its own
C event loop). wrk's exit status is checked. Results: benchmarks/results/hub_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import ROOT, BenchmarkError, Server, entry, run_checked, serve

NAME = "hub_load"

ENDPOINTS = {
    "list": "/api/v1/envs?limit=50",
    "search": "/api/v1/envs?q=chess&limit=20",
    "tag+sort": "/api/v1/envs?tag=games&sort=-likes&limit=20",
    "detail": "/api/v1/envs/org1/env_00001",
    "resolve": "/api/v1/envs/org1/env_00001/resolve",
}


# Issue 49's targets at 50,000 envs, 32 clients, one process: requests/s at least, p99 at most;
# PostgreSQL within 2x of SQLite.
TARGETS = {
    "list": (1500, 50.0),
    "search": (1500, 50.0),
    "tag+sort": (1500, 50.0),
    "detail": (3000, None),
    "resolve": (3000, None),
}


def seed(url: str, envs: int) -> str:
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from tests.hub.helpers import ListSource, space

    migrate(url)
    items = [
        space(i, owner=f"org{i % 97}", tags=["openenv", ("games", "coding", "chess", "tools")[i % 4]])
        for i in range(envs)
    ]
    engine = make_engine(url)
    index_source(sessionmaker_for(engine), ListSource(items))
    engine.dispose()
    return url


@contextlib.contextmanager
def database(kind: str, work: Path, postgres_url: str | None) -> Iterator[str]:
    """A fresh, empty database of `kind` for one run (a PostgreSQL one is dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite:///{work / 'hub.sqlite3'}"
        return
    if not postgres_url:
        raise BenchmarkError("PostgreSQL runs need --postgres-url or TEST_DATABASE_URL (scripts/systems prints it)")
    import uuid

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from hub_service.db import make_engine

    name = f"openenv_hub_load_{uuid.uuid4().hex[:10]}"
    admin = make_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# Serves the Hub API the way `openenv hub serve` does; `--host H --port P` come last on its command line.
_SERVE = (
    "import sys, uvicorn; from hub_service.app import create_app; "
    "uvicorn.run(create_app(run_migrations=False), host=sys.argv[-3], port=int(sys.argv[-1]), "
    f"loop={_eventloop.LOOP!r}, log_level='warning', proxy_headers=False)"
)


@contextlib.contextmanager
def hub_server(url: str, work: Path) -> Iterator[Server]:
    # Rate limits on: every request takes a token (from its process's lease of the shared bucket).
    env = {
        "OPENENV_HUB_DATABASE_URL": url,
        "OPENENV_HUB_DATA_DIR": str(work),
        "OPENENV_HUB_LOCAL_SOURCE": "",
        "OPENENV_HUB_RATE_API_BURST": "100000000",
        "OPENENV_HUB_RATE_API_PER_MINUTE": "1e12",
    }
    with serve([sys.executable, "-c", _SERVE], ROOT, env, health="/api/v1/health") as server:
        yield server


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def with_wrk(base: str, path: str, concurrency: int, seconds: float) -> dict[str, Any]:
    out = run_checked(
        ["wrk", "-t2", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency", base + path],
        what="wrk",
        timeout=seconds + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    latency = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "requests_per_s": round(rps),
        "p50_ms": round(_ms(latency["50"]), 2),
        "p99_ms": round(_ms(latency["99"]), 2),
        "non_2xx": int(errors.group(1)) if errors else 0,
    }


def with_python(base: str, path: str, concurrency: int, seconds: float) -> dict[str, Any]:
    import httpx

    async def run() -> tuple[int, list[float], int]:
        samples: list[float] = []
        bad = 0
        deadline = time.perf_counter() + seconds
        async with httpx.AsyncClient(
            base_url=base, limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        ) as client:

            async def one() -> None:
                nonlocal bad
                while time.perf_counter() < deadline:
                    t0 = time.perf_counter()
                    reply = await client.get(path)
                    samples.append((time.perf_counter() - t0) * 1e3)
                    bad += reply.status_code >= 300

            await asyncio.gather(*(one() for _ in range(concurrency)))
        if _eventloop.running() != _eventloop.LOOP:
            raise BenchmarkError(f"the load generator ran on {_eventloop.running()}, not {_eventloop.LOOP}")
        return len(samples), samples, bad

    n, samples, bad = _eventloop.run(run())
    samples.sort()
    return {
        "requests_per_s": round(n / seconds),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[int(0.99 * (len(samples) - 1))], 2),
        "non_2xx": bad,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="5000", help="catalog sizes, comma-separated (e.g. 5000,50000)")
    parser.add_argument("--databases", default="sqlite", help="sqlite, postgresql, or both comma-separated")
    parser.add_argument("--postgres-url", default=os.environ.get("TEST_DATABASE_URL"))
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    sizes = [int(n) for n in args.envs.split(",")]
    kinds = [k.strip() for k in args.databases.split(",")]
    unknown = set(kinds) - {"sqlite", "postgresql"}
    if unknown:
        raise BenchmarkError(f"--databases: unknown {', '.join(sorted(unknown))}; use sqlite, postgresql or both")
    tool = "wrk" if shutil.which("wrk") else "python"
    driver = with_wrk if tool == "wrk" else with_python
    runs = []
    server_loop = None
    for envs in sizes:
        for kind in kinds:
            work = Path(tempfile.mkdtemp(prefix="openenv-hub-load-"))
            try:
                with database(kind, work, args.postgres_url) as url:
                    started = time.perf_counter()
                    seed(url, envs)
                    seeded_s = time.perf_counter() - started
                    with hub_server(url, work) as server:
                        results = {
                            name: driver(server.url, path, args.concurrency, args.seconds)
                            for name, path in ENDPOINTS.items()
                        }
                        server_loop = server.loop
            finally:
                shutil.rmtree(work, ignore_errors=True)
            failed = {name: r["non_2xx"] for name, r in results.items() if r["non_2xx"]}
            if failed:
                raise BenchmarkError(
                    f"the Hub API ({envs} envs, {kind}) answered with errors (non-2xx responses per endpoint): {failed}"
                )
            runs.append({"envs": envs, "database": kind, "seed_s": round(seeded_s, 1), "endpoints": results})
            print(_describe(runs[-1], args.concurrency, tool), file=sys.stderr)
    report = {
        "concurrency": args.concurrency,
        "seconds": args.seconds,
        "load_tool": tool,
        "targets": {
            name: {"requests_per_s": rps, "p99_ms": p99, "envs": 50000} for name, (rps, p99) in TARGETS.items()
        },
        "runs": runs,
    }
    loops = {"hub API": {"client": _eventloop.LOOP if tool == "python" else None, "server": server_loop}}
    doc = _results.save(NAME, args, report, loops)
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    for run in runs:
        print(_describe(run, args.concurrency, tool))


def _describe(run: dict[str, Any], concurrency: int, tool: str) -> str:
    lines = [
        f"Hub API, {run['envs']} envs on {run['database']}, one uvicorn process, {concurrency} concurrent clients "
        f"({tool}), {os.cpu_count()} cores"
    ]
    for name, r in run["endpoints"].items():
        lines.append(
            f"  {name:9s} {r['requests_per_s']:6d} req/s   p50 {r['p50_ms']:7.2f} ms   p99 {r['p99_ms']:7.2f} ms   "
            f"non-2xx {r['non_2xx']}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    entry(main)
