"""The Hub API under load: requests/s and latency at a fixed concurrency, per endpoint.

    python benchmarks/hub_load.py [--envs 5000] [--concurrency 32] [--seconds 10] [--json]

Seeds a SQLite catalog with N environments, serves the Hub API the way `openenv hub serve` does
(one uvicorn process, rate limits raised out of the way), and drives each endpoint with `wrk`
(Debian's package; `apt-get install wrk`) from a second process on 127.0.0.1. Without wrk, a
Python load generator (asyncio + httpx, same concurrency) is used and the report says so: it is
much slower than wrk, so its numbers bound the server from below.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
    items = [space(i, owner=f"org{i % 97}", tags=["openenv", ("games", "coding", "chess", "tools")[i % 4]]) for i in range(envs)]
    index_source(sessionmaker_for(make_engine(url)), ListSource(items))
    return url


def start_server(url: str, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OPENENV_HUB_DATABASE_URL": url, "OPENENV_HUB_DATA_DIR": str(work), "OPENENV_HUB_LOCAL_SOURCE": "",
           "OPENENV_HUB_RATE_API_BURST": "100000000", "OPENENV_HUB_RATE_API_PER_MINUTE": "1e12"}
    code = ("import uvicorn; from hub_service.app import create_app; "
            f"uvicorn.run(create_app(run_migrations=False), host='127.0.0.1', port={port}, log_level='warning', proxy_headers=False)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/api/v1/health", timeout=1):
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the Hub API did not start")


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def with_wrk(base: str, path: str, concurrency: int, seconds: float) -> dict[str, Any]:
    out = subprocess.run(["wrk", "-t2", f"-c{concurrency}", f"-d{int(seconds)}s", "--latency", base + path],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    latency = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"requests_per_s": round(rps), "p50_ms": round(_ms(latency["50"]), 2), "p99_ms": round(_ms(latency["99"]), 2),
            "non_2xx": int(errors.group(1)) if errors else 0}


def with_python(base: str, path: str, concurrency: int, seconds: float) -> dict[str, Any]:
    import httpx

    async def run() -> tuple[int, list[float], int]:
        samples: list[float] = []
        bad = 0
        deadline = time.perf_counter() + seconds
        async with httpx.AsyncClient(base_url=base, limits=httpx.Limits(max_connections=concurrency)) as client:
            async def one() -> None:
                nonlocal bad
                while time.perf_counter() < deadline:
                    t0 = time.perf_counter()
                    reply = await client.get(path)
                    samples.append((time.perf_counter() - t0) * 1e3)
                    bad += reply.status_code >= 300
            await asyncio.gather(*(one() for _ in range(concurrency)))
        return len(samples), samples, bad

    n, samples, bad = asyncio.run(run())
    samples.sort()
    return {"requests_per_s": round(n / seconds), "p50_ms": round(statistics.median(samples), 2),
            "p99_ms": round(samples[int(0.99 * (len(samples) - 1))], 2), "non_2xx": bad}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tool = "wrk" if shutil.which("wrk") else "python"
    driver = with_wrk if tool == "wrk" else with_python
    work = Path(tempfile.mkdtemp(prefix="openenv-hub-load-"))
    proc = None
    try:
        url = seed(work, args.envs)
        proc, base = start_server(url, work)
        results = {name: driver(base, path, args.concurrency, args.seconds) for name, path in ENDPOINTS.items()}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    report = {"envs": args.envs, "concurrency": args.concurrency, "seconds": args.seconds, "load_tool": tool, "cpus": os.cpu_count(), "endpoints": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"Hub API, {args.envs} envs on SQLite, one uvicorn process, {args.concurrency} concurrent clients ({tool}), {os.cpu_count()} cores")
    for name, r in results.items():
        print(f"  {name:9s} {r['requests_per_s']:6d} req/s   p50 {r['p50_ms']:7.2f} ms   p99 {r['p99_ms']:7.2f} ms   non-2xx {r['non_2xx']}")


if __name__ == "__main__":
    main()
