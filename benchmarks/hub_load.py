"""The Hub API under load: requests/s and latency at a fixed concurrency, per endpoint.

    python benchmarks/hub_load.py [--envs 5000] [--concurrency 32] [--seconds 10] [--output PATH | --no-save] [--json]

Seeds a SQLite catalog with N environments, serves the Hub API the way `openenv hub serve` does
(one uvicorn process, rate limits raised out of the way), and drives each endpoint with `wrk`
(Debian's package; `apt-get install wrk`) from a second process on 127.0.0.1. Without wrk, a
Python load generator (asyncio + httpx, same concurrency) is used and the report says so: it is
much slower than wrk, so its numbers bound the server from below.

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


def seed(work: Path, envs: int) -> str:
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from tests.hub.helpers import ListSource, space

    url = f"sqlite:///{work / 'hub.sqlite3'}"
    migrate(url)
    items = [
        space(i, owner=f"org{i % 97}", tags=["openenv", ("games", "coding", "chess", "tools")[i % 4]])
        for i in range(envs)
    ]
    index_source(sessionmaker_for(make_engine(url)), ListSource(items))
    return url


# Serves the Hub API the way `openenv hub serve` does; `--host H --port P` come last on its command line.
_SERVE = (
    "import sys, uvicorn; from hub_service.app import create_app; "
    "uvicorn.run(create_app(run_migrations=False), host=sys.argv[-3], port=int(sys.argv[-1]), "
    f"loop={_eventloop.LOOP!r}, log_level='warning', proxy_headers=False)"
)


@contextlib.contextmanager
def hub_server(url: str, work: Path) -> Iterator[Server]:
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
    parser.add_argument("--envs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    tool = "wrk" if shutil.which("wrk") else "python"
    driver = with_wrk if tool == "wrk" else with_python
    work = Path(tempfile.mkdtemp(prefix="openenv-hub-load-"))
    try:
        url = seed(work, args.envs)
        with hub_server(url, work) as server:
            results = {
                name: driver(server.url, path, args.concurrency, args.seconds) for name, path in ENDPOINTS.items()
            }
            failed = {name: r["non_2xx"] for name, r in results.items() if r["non_2xx"]}
            if failed:
                raise BenchmarkError(f"the Hub API answered with errors (non-2xx responses per endpoint): {failed}")
            server_loop = server.loop
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "envs": args.envs,
        "concurrency": args.concurrency,
        "seconds": args.seconds,
        "load_tool": tool,
        "endpoints": results,
    }
    loops = {"hub API": {"client": _eventloop.LOOP if tool == "python" else None, "server": server_loop}}
    doc = _results.save(NAME, args, report, loops)
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(
        f"Hub API, {args.envs} envs on SQLite, one uvicorn process, {args.concurrency} concurrent clients ({tool}), {os.cpu_count()} cores"
    )
    for name, r in results.items():
        print(
            f"  {name:9s} {r['requests_per_s']:6d} req/s   p50 {r['p50_ms']:7.2f} ms   p99 {r['p99_ms']:7.2f} ms   non-2xx {r['non_2xx']}"
        )


if __name__ == "__main__":
    entry(main)
