"""How long `GET /api/v1/catalog/snapshot` takes on a Hub listing N passing envs, and the Hub's peak RSS.

    python benchmarks/catalog_snapshot.py --envs 5000

A child process fills a fresh SQLite database with N indexed envs, each with a passed revision
carrying a real manifest and discovery record (the bundled echo_env's). This process then starts
the Hub API (uvicorn thread), downloads the snapshot once to warm it and once timed, reading the
body in chunks, and reports wall time, size and this process's peak RSS (VmHWM: the Hub and the
reading client together, an upper bound for the Hub). Prints one JSON document (and writes it to --output).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def populate(url: str, n: int) -> None:
    """N passing envs, inserted in bulk (the pipeline's work is not what is measured)."""
    import datetime as dt

    import yaml
    from sqlalchemy import insert, select, update

    from hub_service.catalog.discovery import read_discovery
    from hub_service.catalog.models import EnvRecord, EnvVersion
    from hub_service.db import make_engine, migrate

    migrate(url)
    folder = ROOT / "envs" / "echo_env"
    manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
    discovery = read_discovery(folder)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(
            insert(EnvRecord),
            [
                dict(
                    source="hf", owner=f"user{i % 97}", name=f"env_{i:05d}", title=f"Env {i}",
                    description=f"task number {i}: echo a message", tags=["openenv", f"t{i % 9}"],
                    status="passing", sha=f"{i:040x}", indexed_at=now, created_at=now, updated_at=now,
                )
                for i in range(n)
            ],
        )  # fmt: skip
        ids = dict(conn.execute(select(EnvRecord.name, EnvRecord.id)).all())
        conn.execute(
            insert(EnvVersion),
            [
                dict(
                    env_id=ids[f"env_{i:05d}"], sha=f"{i:040x}", ref="main", state="passed", created_at=now,
                    manifest=manifest, discovery=discovery, registry_ref=f"127.0.0.1:5000/openenv/env_{i:05d}:{i:040x}",
                    image_digest="sha256:" + f"{i:064x}",
                )
                for i in range(n)
            ],
        )  # fmt: skip
        for env_id, version_id in conn.execute(select(EnvVersion.env_id, EnvVersion.id)).all():
            conn.execute(update(EnvRecord).where(EnvRecord.id == env_id).values(latest_version_id=version_id))
    engine.dispose()


def measure(url: str, data_dir: Path) -> dict[str, Any]:
    import httpx

    from hub_service.app import create_app
    from hub_service.settings import HubSettings
    from tests.support.servers import serve_app

    settings = HubSettings(data_dir=data_dir, database_url=url, local_source=None, website=False)
    with serve_app(create_app(settings, run_migrations=False)) as base, httpx.Client(base_url=base, timeout=120) as c:
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
    digest = json.loads(b"{" + tail[tail.rindex(b'"digest"') :])["digest"]
    return {
        "seconds": round(seconds, 3),
        "bytes": size,
        "idle_rss_mb": idle_mb,
        "peak_rss_mb": _peak_mb(),
        "digest": digest,
    }


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=5000)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--populate", default=None, help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args()
    if args.populate:
        populate(args.populate, args.envs)
        return 0
    with tempfile.TemporaryDirectory(prefix="catalog-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'hub.sqlite3'}"
        subprocess.run([sys.executable, __file__, "--envs", str(args.envs), "--populate", url], check=True)
        result = {"envs": args.envs, **measure(url, Path(tmp) / "data")}
    text = json.dumps(result)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
