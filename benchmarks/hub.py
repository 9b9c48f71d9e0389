"""The Hub service's numbers, in one run:

    python benchmarks/hub.py [--spaces 5000] [--page-size 1000] [--no-build] [--parts index,search,pipeline,engines]
        [--engine-envs echo_env,...] [--engine-copies 1] [--engine-configs A AA AB] [--second-engine URL] [--light]
        [--output PATH | --no-save] [--json]

- index: a local Hugging Face Hub stand-in seeded with N Spaces tagged openenv; a full index
  (wall time, HTTP requests the real huggingface_hub client made), then a re-index with no change
  (wall time, pipeline jobs created);
- search: latency p50/p95 of catalog queries over HTTP on SQLite (text, tags, status, sorts, pages);
- pipeline: build + smoke of envs/echo_env with Docker, cold (no layer cache) and warm, and what
  the trust checks (capacity, determinism, reward) add to its smoke test, each on its own;
- engines: env-revisions per hour through the whole pipeline (fetch, validate, build, smoke) with
  workers on one and on two container engines sharing one queue, on the same work (the bundled envs,
  each copied to distinct revisions); the second engine (--second-engine, default
  $OPENENV_TEST_DOCKER2_TCP, scripts/docker-engine2) stands in for a second machine. Configurations:
  A (one worker, one engine), AA (two workers, one engine), AB (a worker on each engine). See _engines.py.

Targets (issue 5): index 5,000 in <= 10 s with <= ceil(5000 / page) + 5 requests; no-change
re-index <= 2 s and 0 jobs; search p95 <= 20 ms; smoke test of a built image <= 5 s. Issue 19:
each trust check adds <= 10 s to echo_env's smoke test.

The Hub API runs in a uvicorn thread with the env servers' settings (uvloop, `_eventloop.LOOP`);
the measuring client is blocking (httpx). Results: benchmarks/results/hub.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _engines
import _eventloop
import _results
from _harness import ROOT, BenchmarkError, entry

NAME = "hub"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def bench_index(work: Path, spaces: int, page_size: int) -> tuple[dict[str, Any], Any]:
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from hub_service.indexer.sources import HfSource
    from tests.support.hf_hub import HubStandIn

    hub = HubStandIn(work / "hf", page_size=page_size)
    hub.start()
    t0 = time.monotonic()
    hub.create_spaces(
        {
            "repo_id": f"org{i % 97}/env_{i:05d}",
            "tags": ["openenv", ("games", "coding", "chess", "tools")[i % 4]],
            "likes": (i * 37) % 500,
            "stage": ("RUNNING", "SLEEPING", "BUILDING")[i % 3],
        }
        for i in range(spaces)
    )
    seed_s = time.monotonic() - t0
    url = f"sqlite:///{work / 'hub.sqlite3'}"
    migrate(url)
    factory = sessionmaker_for(make_engine(url))
    source = HfSource(hub.url, hub.token)
    hub.reset_requests()
    t0 = time.monotonic()
    full = index_source(factory, source)
    full_s = time.monotonic() - t0
    full_requests = hub.request_count()
    hub.reset_requests()
    t0 = time.monotonic()
    again = index_source(factory, source)
    again_s = time.monotonic() - t0
    result = {
        "spaces": spaces,
        "page_size": page_size,
        "seed_s": round(seed_s, 2),
        "full_index_s": round(full_s, 2),
        "full_index_requests": full_requests,
        "request_budget": math.ceil(spaces / page_size) + 5,
        "jobs_created": full.jobs,
        "reindex_s": round(again_s, 2),
        "reindex_requests": hub.request_count(),
        "reindex_jobs": again.jobs,
    }
    hub.stop()
    return result, url


def bench_search(url: str, rounds: int) -> dict[str, Any]:
    import httpx

    from hub_service.app import create_app
    from hub_service.settings import HubSettings
    from tests.support.servers import serve_app

    queries: list[dict[str, Any]] = [
        {},
        {"q": "env_01234"},
        {"q": "org5"},
        {"q": "chess"},
        {"tag": "games"},
        {"tag": ["coding", "openenv"]},
        {"status": "pending"},
        {"sort": "-likes"},
        {"sort": "-updated"},
        {"sort": "cold_start"},
        {"q": "env", "sort": "-likes", "limit": 100},
    ]
    # One client measuring latency: the per-client rate limit (a protection, not the thing measured) is lifted.
    settings = HubSettings(
        database_url=url,
        data_dir=Path(url.split("///")[1]).parent,
        local_source=None,
        rate_api_burst=100_000_000,
        rate_api_per_minute=1e12,
    )
    times: list[float] = []
    with serve_app(create_app(settings, run_migrations=False)) as base, httpx.Client(base_url=base) as client:
        cursor = client.get("/api/v1/envs", params={"limit": 50}).json()["next_cursor"]
        queries.append({"cursor": cursor, "limit": 50})
        for q in queries:  # warm up
            client.get("/api/v1/envs", params=q).raise_for_status()
        for _ in range(rounds):
            for q in queries:
                t0 = time.perf_counter()
                client.get("/api/v1/envs", params=q).raise_for_status()
                times.append((time.perf_counter() - t0) * 1e3)
    return {
        "requests": len(times),
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(_pct(times, 0.95), 2),
        "max_ms": round(max(times), 2),
    }


def bench_pipeline(work: Path) -> dict[str, Any]:
    from hub_service.pipeline import stages
    from hub_service.settings import HubSettings

    base = os.environ.get("OPENENV_HUB_BASE_IMAGE") or os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        return {"skipped": "set OPENENV_HUB_BASE_IMAGE (bash scripts/base-image prints the one this machine builds on)"}
    import docker

    client = docker.from_env()
    folder = work / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    # A unique file makes the first build "cold": no layer of this context is cached.
    (folder / "server" / "bench_nonce.txt").write_text(str(time.time_ns()))
    settings = HubSettings(data_dir=work / "data", base_image=base, image_prefix="openenv-bench", local_source=None)
    out: dict[str, Any] = {}
    for label in ("cold", "warm"):
        log = stages.StageLog()
        t0 = time.monotonic()
        built = stages.build(settings, folder, "bench", "echo_env", "0" * 40, True, log)
        build_s = time.monotonic() - t0
        t0 = time.monotonic()
        smoke = stages.smoke(settings, built, folder, log)
        out[label] = {
            "build_s": round(build_s, 2),
            "smoke_s": round(time.monotonic() - t0, 2),
            "cold_start_s": smoke.cold_start_s,
            "step_p50_ms": smoke.step_p50_ms,
        }
    out["trust"] = bench_trust(settings, built, folder)
    if built.image_ref:
        client.images.remove(built.image_ref, force=True)
    return out


TRUST_CHECKS = ("determinism", "reward_check", "capacity")


def bench_trust(settings: Any, built: Any, folder: Path, rounds: int = 3) -> dict[str, Any]:
    """What the trust checks add to a smoke test of the built echo_env: smoke tests with the checks
    off and on, alternating, `rounds` each; every check's own time as the smoke log records it."""
    from hub_service.pipeline import stages

    off_settings = settings.model_copy(update={f"{c}_check" if c != "reward_check" else c: False for c in TRUST_CHECKS})
    off: list[float] = []
    on: list[float] = []
    checks: dict[str, list[float]] = {c: [] for c in TRUST_CHECKS}
    for _ in range(rounds):
        for label, chosen in (("off", off_settings), ("on", settings)):
            t0 = time.monotonic()
            smoke = stages.smoke(chosen, built, folder, stages.StageLog())
            (off if label == "off" else on).append(time.monotonic() - t0)
            if label == "on":
                for c in TRUST_CHECKS:
                    result = getattr(smoke, c)
                    if result.get("verdict") == "unchecked":
                        raise BenchmarkError(f"the {c} check did not run on echo_env: {result.get('reason')}")
                    checks[c].append(result["seconds"])
    return {
        "rounds": rounds,
        "smoke_off_s": round(statistics.median(off), 2),
        "smoke_on_s": round(statistics.median(on), 2),
        "checks_s": {c: round(statistics.median(v), 2) for c, v in checks.items()},
        "target_s": 10.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spaces", type=int, default=5000)
    parser.add_argument(
        "--page-size", type=int, default=1000, help="items per page the stand-in serves (the Hub's is 1000)"
    )
    parser.add_argument("--search-rounds", type=int, default=20)
    parser.add_argument("--no-build", action="store_true", help="skip every Docker measurement (pipeline and engines)")
    parser.add_argument(
        "--parts",
        default="index,search,pipeline,engines",
        help="which parts to measure, comma-separated (search needs index)",
    )
    parser.add_argument(
        "--engine-envs", default=",".join(_engines.BUNDLED), help="bundled envs the engines part builds"
    )
    parser.add_argument("--engine-copies", type=int, default=1, help="distinct revisions of each env")
    parser.add_argument("--engine-configs", nargs="+", default=["A", "AA", "AB"], help="worker engines, a letter each")
    parser.add_argument(
        "--second-engine",
        default=os.environ.get("OPENENV_TEST_DOCKER2_TCP"),
        help="engine B's DOCKER_HOST (default $OPENENV_TEST_DOCKER2_TCP)",
    )
    parser.add_argument(
        "--no-warm-up", action="store_true", help="engines part: no untimed first build on each engine (tests)"
    )
    parser.add_argument(
        "--light", action="store_true", help="engines part: trust checks and RFC 008's statistical level off"
    )
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    from openenv.server.run import uvicorn_options

    server_loop = uvicorn_options()["loop"]  # what serve_app's uvicorn thread runs on
    if server_loop != _eventloop.LOOP:
        raise BenchmarkError(f"the Hub API would run on {server_loop}, not {_eventloop.LOOP}")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if parts - {"index", "search", "pipeline", "engines"} or ("search" in parts and "index" not in parts):
        raise BenchmarkError(f"--parts {args.parts}: choose from index, search, pipeline, engines (search needs index)")
    if args.engine_copies < 1 or any(not c or set(c) - {"A", "B"} for c in args.engine_configs):
        raise BenchmarkError("--engine-copies must be at least 1 and each --engine-configs a string of A and B")
    skipped: dict[str, Any] = {"skipped": "not in --parts"}
    work = Path(tempfile.mkdtemp(prefix="openenv-hub-bench-"))
    try:
        index: dict[str, Any]
        index, url = bench_index(work, args.spaces, args.page_size) if "index" in parts else (skipped, "")
        search = bench_search(url, args.search_rounds) if "search" in parts else skipped
        docker_skip = {"skipped": "--no-build"} if args.no_build else None
        pipeline: dict[str, Any] = skipped if "pipeline" not in parts else docker_skip or bench_pipeline(work)
        engines: dict[str, Any] = (
            skipped
            if "engines" not in parts
            else docker_skip
            or _engines.bench_engines(
                work / "engines",
                [e for e in args.engine_envs.split(",") if e],
                args.engine_copies,
                args.engine_configs,
                args.second_engine,
                args.light,
                warm_up=not args.no_warm_up,
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report: dict[str, dict[str, Any]] = {"index": index, "search": search, "pipeline": pipeline, "engines": engines}
    doc = _results.save(NAME, args, report, {"hub API": {"client": None, "server": server_loop}})
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    for name, part in report.items():
        if "skipped" in part:
            print(f"{name}: skipped ({part['skipped']})")
    if "skipped" not in engines:
        for config, c in engines["configs"].items():
            print(
                f"pipeline on {config} ({c['workers']} workers, {c['engines']} engines): {c['revisions']} revisions in "
                f"{c['wall_s']} s = {c['revisions_per_hour']} per hour; per engine {c['per_engine']}; doubled "
                f"{c['doubled']}, build and smoke apart {c['build_and_smoke_apart']}, image elsewhere {c['image_elsewhere']}"
            )
    if "skipped" in index or "skipped" in search:
        return
    i = index
    print(
        f"index {i['spaces']} Spaces (page {i['page_size']}): {i['full_index_s']} s, {i['full_index_requests']} requests "
        f"(budget {i['request_budget']}), {i['jobs_created']} jobs; no-change re-index {i['reindex_s']} s, "
        f"{i['reindex_requests']} requests, {i['reindex_jobs']} jobs"
    )
    print(
        f"search over {i['spaces']} envs (SQLite, HTTP): p50 {search['p50_ms']} ms, p95 {search['p95_ms']} ms, max {search['max_ms']} ms"
    )
    if "skipped" not in pipeline:
        for label in ("cold", "warm"):
            p = pipeline[label]
            print(
                f"echo_env {label}: build {p['build_s']} s, smoke {p['smoke_s']} s (cold start {p['cold_start_s']} s, step p50 {p['step_p50_ms']} ms)"
            )
        t = pipeline["trust"]
        print(
            f"trust checks on echo_env's smoke test: {t['smoke_off_s']} s off, {t['smoke_on_s']} s on; each: "
            + ", ".join(f"{c} {v} s" for c, v in t["checks_s"].items())
        )


if __name__ == "__main__":
    entry(main)
