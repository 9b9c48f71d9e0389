"""The catalog snapshot of a Hub listing N passing envs: served, and read by upstream's `discover`.

    python benchmarks/catalog_snapshot.py --envs 50000 [--upstream-python PATH] [--output PATH | --no-save]

A child process fills a fresh SQLite database with N indexed envs, each with a passed revision
carrying a real manifest and discovery record (the bundled echo_env's). This process then serves
the Hub API (uvicorn thread) and measures:

- `seconds`, `bytes`: `GET /api/v1/catalog/snapshot` (the whole catalog while it fits in one
  document, else its first shard), read in chunks once to warm it and once timed, with this
  process's peak RSS (VmHWM: the Hub and the reading client together, an upper bound for the Hub);
- `index_first_s`: the first `GET /api/v1/catalog/index` of the catalog's revision, which makes
  every shard and keeps it on disk (hub_service/catalog/shard_store.py);
- `read`, the target (issue 49: at most 5 s for 50,000 envs): from asking for the index to
  upstream 0.10.0's own `discover` command (run by its CLI, in its own venv) having read every
  shard the index names: the shards fetched one after the other into files, each handed as it
  lands to one of `--upstream-workers` upstream processes started (and their CLI imported: that
  is `upstream_cli_import_s`, a cost of upstream's CLI whatever the catalog) before the clock
  starts. Each shard's digest as upstream printed it must be the one the index names;
- `ours_s`: `openenv discover --hub` (a fresh process: imports, index, every shard, digests, search).

Prints the results as one JSON line; the document with the machine goes to --output
(default benchmarks/results/catalog_snapshot.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import _eventloop
import _results
from _harness import BenchmarkError, entry

NAME = "catalog_snapshot"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
UPSTREAM_010 = ROOT / ".cache" / "upstream-venv-0.10.0" / "bin" / "python"
QUERY = "echo a message"

# One upstream worker: its CLI imported once, then upstream's own `discover` command run on each
# shard file named on stdin, one JSON line out per shard. Run outside this checkout, whose
# `openenv` package would shadow upstream's.
_UPSTREAM_WORKER = """
import json, sys, time
started = time.perf_counter()
from importlib.metadata import version
from typer.testing import CliRunner
from openenv.cli.__main__ import app
runner = CliRunner()
print(json.dumps({"import_s": time.perf_counter() - started, "version": version("openenv")}), flush=True)
for line in sys.stdin:
    path = json.loads(line)
    result = runner.invoke(app, ["discover", sys.argv[1], "--catalog", path, "--json", "--limit", "1"])
    out = {"path": path, "code": result.exit_code}
    if result.exit_code == 0:
        out["snapshot"] = json.loads(result.stdout)["snapshot"]
    else:
        out["output"] = result.output[-2000:]
    print(json.dumps(out), flush=True)
"""


def populate(url: str, n: int) -> None:
    """N passing envs, inserted in bulk (the pipeline's work is not what is measured)."""
    from hub_service.db import make_engine, migrate
    from tests.hub.helpers import seed_passing_envs

    migrate(url)
    engine = make_engine(url)
    seed_passing_envs(engine, n)
    engine.dispose()


def measure(url: str, data_dir: Path, upstream: str | None, workers: int) -> dict[str, Any]:
    import httpx

    from hub_service.app import create_app
    from hub_service.settings import HubSettings
    from tests.support.servers import serve_app

    settings = HubSettings(data_dir=data_dir, database_url=url, local_source=None, website=False)
    with serve_app(create_app(settings, run_migrations=False)) as base, httpx.Client(base_url=base, timeout=300) as c:
        idle_mb = _peak_mb()  # the Hub serving, before the first snapshot
        rounds = []
        for _ in range(2):
            started, size, tail = time.perf_counter(), 0, b""
            with c.stream("GET", "/api/v1/catalog/snapshot") as reply:
                reply.raise_for_status()
                for chunk in reply.iter_bytes():
                    size += len(chunk)
                    tail = (tail + chunk)[-200:]
            rounds.append((time.perf_counter() - started, size, tail))
        seconds, size, tail = rounds[-1]
        peak_mb = _peak_mb()
        started = time.perf_counter()
        c.get("/api/v1/catalog/index").raise_for_status()
        result: dict[str, Any] = {"index_first_s": round(time.perf_counter() - started, 3)}
        if upstream:
            result["read"] = _upstream_read(c, upstream, workers, data_dir / "read")
        started = time.perf_counter()
        ours = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "discover", QUERY, "--hub", base, "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        result["ours_s"] = round(time.perf_counter() - started, 3)
    if ours.returncode != 0:
        raise BenchmarkError(f"openenv discover --hub failed: {ours.stderr[-2000:]}")
    found = json.loads(ours.stdout)
    result["ours_envs"], result["shards"] = found["envs"], found["shards"]
    digest = json.loads(b"{" + tail[tail.rindex(b'"digest"') :])["digest"]
    return {"seconds": round(seconds, 3), "bytes": size, "idle_rss_mb": idle_mb, "peak_rss_mb": peak_mb, "digest": digest, **result}  # fmt: skip


def _upstream_read(client: Any, python: str, workers: int, folder: Path) -> dict[str, Any]:
    """The index and every shard it names, each handed as it lands to an upstream worker; timed from
    the index request to the last worker's answer (the workers started, and ready, before)."""
    folder.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    procs = [
        subprocess.Popen(
            [python, "-c", _UPSTREAM_WORKER, QUERY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=folder, env=env
        )
        for _ in range(workers)
    ]  # fmt: skip
    try:
        ready = [json.loads(_line(p.stdout)) for p in procs]
        started = time.perf_counter()
        index = client.get("/api/v1/catalog/index").raise_for_status().json()
        sent: list[list[str]] = [[] for _ in procs]
        for n, shard in enumerate(index["shards"]):
            path = folder / f"shard-{n}.json"
            with client.stream("GET", shard["url"]) as reply, path.open("wb") as out:
                reply.raise_for_status()
                for chunk in reply.iter_bytes():
                    out.write(chunk)
            proc = procs[n % workers]
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(str(path)) + "\n")
            proc.stdin.flush()
            sent[n % workers].append(shard["digest"])
        fetched = time.perf_counter() - started
        answers = [
            (json.loads(_line(p.stdout)), digest) for p, digests in zip(procs, sent, strict=True) for digest in digests
        ]
        seconds = time.perf_counter() - started
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
    for answer, digest in answers:
        if answer["code"] != 0 or answer["snapshot"] != digest:
            raise BenchmarkError(f"upstream's discover did not read {answer['path']} as indexed: {answer}")
    return {
        "seconds": round(seconds, 3),
        "fetch_s": round(fetched, 3),
        "envs": index["envs"],
        "shards": len(index["shards"]),
        "shard_bytes_max": max(s["bytes"] for s in index["shards"]),
        "upstream_workers": workers,
        "upstream_openenv": ready[0]["version"],
        "upstream_cli_import_s": round(max(r["import_s"] for r in ready), 3),
    }


def _line(stream: IO[str] | None) -> str:
    line = stream.readline() if stream is not None else ""
    if not line:
        raise BenchmarkError("an upstream worker stopped without answering")
    return line


def _peak_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries the parent's RSS at fork into
    ru_maxrss across exec, so a benchmark started by a big process (pytest) would read the parent's."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=5000)
    parser.add_argument(
        "--upstream-python",
        default=str(UPSTREAM_010) if UPSTREAM_010.exists() else "",
        help="upstream openenv 0.10.0's python (default: the project's venv of it; empty: no upstream read)",
    )
    parser.add_argument("--upstream-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--populate", default=None, help=argparse.SUPPRESS)  # the child's job
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    if args.populate:
        populate(args.populate, args.envs)
        return
    _eventloop.require()
    with tempfile.TemporaryDirectory(prefix="catalog-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'hub.sqlite3'}"
        subprocess.run([sys.executable, __file__, "--envs", str(args.envs), "--populate", url], check=True)
        started = time.perf_counter()
        result = {"envs": args.envs, **measure(url, Path(tmp) / "data", args.upstream_python, args.upstream_workers)}
        result["measure_s"] = round(time.perf_counter() - started, 3)
    if result["ours_envs"] != args.envs or result.get("read", {}).get("envs", args.envs) != args.envs:
        raise BenchmarkError(f"not every env was read: {result}")
    loops = {"hub API": {"client": None, "server": _eventloop.LOOP}}
    _results.save(NAME, args, result, loops)  # upstream 0.10.0 is `openenv`: its version is in `read`
    print(json.dumps(result))


if __name__ == "__main__":
    entry(main)
