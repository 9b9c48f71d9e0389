"""Keeping the index live, measured side by side in one run:

    python benchmarks/live.py [--spaces 2000] [--page-size 1000] [--webhooks 200] [--output PATH | --no-save] [--json]

- webhook: latency of `POST /webhooks/hf` for distinct push payloads (record + queue a job; the
  work runs later), next to doing that work inline (read the Space from the Hub, index it) as a
  receiver that indexes before it answers would; and a replayed (duplicate) payload;
- end to end: from the webhook to the new sha in the catalog, with one task worker running;
- health: one poll of N Spaces (one listing of their runtime), next to reading each Space's
  runtime with its own request.

Everything runs against the local Hub stand-in (real HTTP, the real huggingface_hub client) and
SQLite. Targets (issue 7): webhook p95 well under the inline work; a poll of N Spaces in
ceil(N / page) requests.

The Hub service runs in a uvicorn thread with the env servers' settings (uvloop, `_eventloop.LOOP`);
the measuring client is blocking (httpx). Results: benchmarks/results/live.json.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import BenchmarkError, entry

NAME = "live"
SECRET = "bench-secret"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values) * 1e3, 2),
        "p95_ms": round(_pct(values, 0.95) * 1e3, 2),
        "n": len(values),
    }


def _push_payload(hub: Any, repo_id: str, old: str, new: str) -> dict[str, Any]:
    repo = hub.space(repo_id)
    return {
        "event": {"action": "update", "scope": "repo.content"},
        "repo": {
            "type": "space",
            "name": repo_id,
            "id": repo.mongo_id,
            "private": False,
            "headSha": new,
            "url": {"web": f"{hub.url}/spaces/{repo_id}"},
            "owner": {"id": "0" * 24},
        },
        "updatedRefs": [{"ref": "refs/heads/main", "oldSha": old, "newSha": new}],
        "webhook": {"id": "bench", "version": 3},
    }


def _expect(reply: Any, *statuses: int) -> Any:
    if reply.status_code not in statuses:
        raise BenchmarkError(
            f"{reply.request.method} {reply.request.url} answered {reply.status_code}: {reply.text[:500]}"
        )
    return reply


def run(spaces: int, page_size: int, webhooks: int) -> dict[str, Any]:
    import httpx
    from pydantic import SecretStr

    from hub_service.app import create_app
    from hub_service.catalog.models import EnvRecord
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.health.service import poll
    from hub_service.indexer.service import index_one, index_source
    from hub_service.indexer.sources import HfSource
    from hub_service.settings import HubSettings
    from hub_service.worker import TASK_KINDS, Worker
    from tests.support.hf_hub import HubStandIn
    from tests.support.servers import serve_app

    work = Path(tempfile.mkdtemp(prefix="openenv-live-bench-"))
    hub = HubStandIn(work / "hf", page_size=page_size)
    hub.start()
    hub.create_spaces(
        {"repo_id": f"org{i % 31}/env_{i:05d}", "stage": ("RUNNING", "SLEEPING")[i % 2]} for i in range(spaces)
    )
    url = f"sqlite:///{work / 'hub.sqlite3'}"
    migrate(url)
    factory = sessionmaker_for(make_engine(url))
    source = HfSource(hub.url, hub.token)
    index_source(factory, source)
    settings = HubSettings(
        data_dir=work / "data",
        database_url=url,
        hf_endpoint=hub.url,
        hf_token=SecretStr(hub.token),
        webhook_secret=SecretStr(SECRET),
        local_source=None,
        rate_webhook_burst=10**6,
        rate_webhook_per_minute=1e9,
    )
    out: dict[str, Any] = {"spaces": spaces, "page_size": page_size}
    names = [f"org{i % 31}/env_{i:05d}" for i in range(min(webhooks, spaces))]

    with serve_app(create_app(settings, run_migrations=False)) as service, httpx.Client(timeout=30) as client:
        headers = {"X-Webhook-Secret": SECRET}
        # Receiving: distinct pushes (each a real new commit on the stand-in).
        payloads = []
        for name in names:
            old = hub.space(name).refs["main"]
            new = hub.commit(name, {"bench.txt": f"{time.time()}"}).oid
            payloads.append(_push_payload(hub, name, old, new))
        hub.webhooks.wait()
        receive = []
        for payload in payloads:
            t0 = time.perf_counter()
            reply = client.post(f"{service}/webhooks/hf", json=payload, headers=headers)
            receive.append(time.perf_counter() - t0)
            _expect(reply, 202)
        duplicate = []
        for payload in payloads[: max(1, len(payloads) // 4)]:
            t0 = time.perf_counter()
            reply = client.post(f"{service}/webhooks/hf", json=payload, headers=headers)
            duplicate.append(time.perf_counter() - t0)
            if _expect(reply, 200, 202).json().get("status") != "duplicate":
                raise BenchmarkError(f"a replayed webhook was not answered as a duplicate: {reply.text}")
        # The same work done inline, per event (what a receiver that indexes before answering costs).
        inline = []
        for payload in payloads:
            owner, name = payload["repo"]["name"].split("/")
            t0 = time.perf_counter()
            index_one(factory, source, owner, name, source.get(owner, name), cause="bench inline")
            inline.append(time.perf_counter() - t0)
        Worker(settings, factory, worker_id="drain", kinds=TASK_KINDS).run_until_idle()
        out["webhook"] = {"receive": _ms(receive), "duplicate": _ms(duplicate), "inline_index": _ms(inline)}

        # End to end: webhook → task worker → catalog, with a worker polling the queue.
        worker = Worker(settings, factory, worker_id="live", kinds=TASK_KINDS)
        thread = threading.Thread(target=worker.run_forever, kwargs={"poll_s": 0.02}, daemon=True)
        thread.start()
        e2e = []
        for name in names[:20]:
            old = hub.space(name).refs["main"]
            new = hub.commit(name, {"bench.txt": f"e2e {time.time()}"}).oid
            payload = _push_payload(hub, name, old, new)
            owner, short = name.split("/")
            t0 = time.perf_counter()
            _expect(client.post(f"{service}/webhooks/hf", json=payload, headers=headers), 202)
            while True:
                with factory() as s:
                    from sqlalchemy import select

                    if s.scalar(select(EnvRecord.sha).where(EnvRecord.owner == owner, EnvRecord.name == short)) == new:
                        break
                if time.perf_counter() - t0 > 30:
                    raise BenchmarkError(f"{name} was not indexed within 30 s of its webhook")
                time.sleep(0.005)
            e2e.append(time.perf_counter() - t0)
        worker.stopping.set()
        thread.join(10)
        out["end_to_end"] = _ms(e2e)

    # Health: one listing of the runtime, next to one request per Space.
    hub.reset_requests()
    t0 = time.perf_counter()
    report = poll(factory, source)
    poll_s = time.perf_counter() - t0
    poll_requests = hub.request_count()
    sample = min(spaces, 500)
    hub.reset_requests()
    t0 = time.perf_counter()
    for i in range(sample):
        source.api.get_space_runtime(f"org{i % 31}/env_{i:05d}")
    per_space_s = time.perf_counter() - t0
    out["health"] = {
        "poll": {
            "spaces": report.seen,
            "seconds": round(poll_s, 3),
            "requests": poll_requests,
            "request_budget": math.ceil(spaces / page_size),
        },
        "per_space": {
            "spaces": sample,
            "seconds": round(per_space_s, 3),
            "requests": hub.request_count(),
            "seconds_for_all": round(per_space_s * spaces / sample, 2),
        },
    }
    hub.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spaces", type=int, default=2000)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--webhooks", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    import logging

    from openenv.server.run import uvicorn_options

    _eventloop.require()
    server_loop = uvicorn_options()["loop"]  # what serve_app's uvicorn thread runs on
    if server_loop != _eventloop.LOOP:
        raise BenchmarkError(f"the Hub service would run on {server_loop}, not {_eventloop.LOOP}")
    logging.disable(logging.INFO)
    result = run(args.spaces, args.page_size, args.webhooks)
    doc = _results.save(NAME, args, result, {"hub service": {"client": None, "server": server_loop}})
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    w, h = result["webhook"], result["health"]
    print(
        f"webhook receive     p50 {w['receive']['p50_ms']:7.2f} ms  p95 {w['receive']['p95_ms']:7.2f} ms  (n={w['receive']['n']})"
    )
    print(f"  duplicate         p50 {w['duplicate']['p50_ms']:7.2f} ms  p95 {w['duplicate']['p95_ms']:7.2f} ms")
    print(
        f"  inline index      p50 {w['inline_index']['p50_ms']:7.2f} ms  p95 {w['inline_index']['p95_ms']:7.2f} ms  (the work, done before answering)"
    )
    print(
        f"webhook → catalog   p50 {result['end_to_end']['p50_ms']:7.2f} ms  p95 {result['end_to_end']['p95_ms']:7.2f} ms  (one task worker)"
    )
    print(
        f"health poll         {h['poll']['spaces']} Spaces in {h['poll']['seconds']:.2f} s with {h['poll']['requests']} requests "
        f"(budget {h['poll']['request_budget']})"
    )
    print(
        f"  per-Space reads   {h['per_space']['spaces']} Spaces in {h['per_space']['seconds']:.2f} s with {h['per_space']['requests']} requests "
        f"(~{h['per_space']['seconds_for_all']:.1f} s for all {result['spaces']})"
    )


if __name__ == "__main__":
    entry(main)
