"""A catalog larger than upstream's 16 MiB reader takes, served in shards: upstream openenv 0.10.0's
own `discover` (in its venv) reads every shard as served, ours follows the index and reads them all,
and refuses a shard that is not the one its index names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from sqlalchemy import Engine, update

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord
from hub_service.db import make_engine, migrate
from hub_service.settings import HubSettings
from tests.hub.helpers import seed_passing_envs
from tests.support.servers import serve_app

MIB = 1024 * 1024


def _digest(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "digest"}
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _shards(url: str) -> tuple[dict[str, Any], list[bytes]]:
    """The Hub's index, checked, and the bytes of every shard it names, each checked against it."""
    index = httpx.get(f"{url}/api/v1/catalog/index", timeout=120).json()
    assert index["digest"] == _digest(index)
    bodies = []
    for shard in index["shards"]:
        reply = httpx.get(url + shard["url"], timeout=120)
        assert reply.status_code == 200, reply.text
        assert reply.headers["openenv-catalog-revision"] == index["revision"]
        body = reply.content
        snapshot = json.loads(body)
        assert len(body) == shard["bytes"] <= index["max_bytes"]
        assert snapshot["digest"] == shard["digest"] == _digest(snapshot)
        paths = [e["data"]["source"]["path"] for e in snapshot["entries"]]
        assert snapshot["inventory"]["paths"] == paths and len(paths) == shard["envs"]
        assert (paths[0], paths[-1]) == (shard["first"], shard["last"])
        assert snapshot["source"]["revision"] == index["revision"] and snapshot["complete"] is True
        bodies.append(body)
    return index, bodies


_UPSTREAM = """
import json, sys
from typer.testing import CliRunner
from openenv.cli.__main__ import app
from openenv.discovery.models import MAX_CATALOG_BYTES
runner = CliRunner()
out = {"max_catalog_bytes": MAX_CATALOG_BYTES}
for key, args in json.loads(sys.argv[1]).items():
    result = runner.invoke(app, args)
    out[key] = {"code": result.exit_code, "stdout": result.stdout, "output": result.output}
print(json.dumps(out))
"""


def _upstream(python: str, cwd: Path, plan: dict[str, list[str]]) -> dict[str, Any]:
    """Upstream's own CLI commands, run in its venv (one process for all of them)."""
    done = subprocess.run(
        [python, "-c", _UPSTREAM, json.dumps(plan)], capture_output=True, text=True, timeout=300, cwd=cwd
    )  # cwd is not the repository root, whose `openenv` package would shadow upstream's
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# docs/hub-api.md shows this loop: upstream's `discover` reading each shard straight from the Hub.
UPSTREAM_LOOP = """
curl -s http://127.0.0.1:7860/api/v1/catalog/index | jq -r '.shards[].url' | while read -r url; do
  curl -s "http://127.0.0.1:7860$url" | openenv discover "echo my message back" --catalog /dev/stdin --json
done
"""


def _documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents printed one after the other in `text`."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while rest := text[at:].lstrip():
        document, at = decoder.raw_decode(text, len(text) - len(rest))
        found.append(document)
    return found


@contextmanager
def _own_hub(tmp_path: Path, n: int, **settings: Any) -> Iterator[tuple[str, HubSettings, Engine]]:
    """A Hub on a SQLite database of its own that lists `n` seeded envs: its URL, settings and engine."""
    url = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(url)
    engine = make_engine(url)
    try:
        seed_passing_envs(engine, n)
        hub = HubSettings(data_dir=tmp_path / "data", database_url=url, local_source=None, website=False, **settings)
        with serve_app(create_app(hub, run_migrations=False)) as served:
            yield served, hub, engine
    finally:
        engine.dispose()


@contextmanager
def _hub(hub_settings: HubSettings, shard_bytes: int, **more: Any) -> Iterator[str]:
    settings = hub_settings.model_copy(update={"catalog_shard_bytes": shard_bytes, **more})
    with serve_app(create_app(settings, run_migrations=False)) as url:
        yield url


def test_a_catalog_over_the_cap_is_served_in_shards_that_upstream_and_ours_read_whole(
    clean_factory, engine: Engine, hub_settings: HubSettings, upstream010_python: str, run_cli, tmp_path: Path
) -> None:
    ids = seed_passing_envs(engine, 150)
    with _hub(hub_settings, 64 * 1024) as url:
        index, bodies = _shards(url)
        plain = httpx.get(f"{url}/api/v1/catalog/snapshot", timeout=60)
        ours = run_cli("discover", "--hub", url, "--json", "--limit", "1000")
        one = run_cli("discover", "env 00149", "--hub", url)
    shards = index["shards"]
    assert len(shards) >= 3 and index["envs"] == 150 and index["left_out"] == [] and index["max_bytes"] == 64 * 1024
    assert shards[0]["url"] == f"/api/v1/catalog/snapshot?revision={index['revision']}"
    # The snapshot URL itself is the first shard, and points to the index.
    assert plain.content == bodies[0] and plain.headers["link"] == '</api/v1/catalog/index>; rel="index"'
    listed = [e["metadata"]["hub"]["id"] for body in bodies for e in json.loads(body)["entries"]]
    assert sorted(listed) == sorted(ids)  # every env once, none twice

    # Upstream 0.10.0's own discover and inspect read every shard as served, and see every env.
    files = []
    for n, body in enumerate(bodies):
        files.append(tmp_path / f"shard-{n}.json")
        files[-1].write_bytes(body)
    plan = {f"all:{n}": ["discover", "", "--catalog", str(f), "--limit", "1000", "--json"] for n, f in enumerate(files)}
    last = json.loads(bodies[-1])["entries"][-1]
    plan["inspect"] = ["catalog", "inspect", last["identifier"], "--catalog", str(files[-1])]
    ran = _upstream(upstream010_python, tmp_path, plan)
    seen = []
    for n, shard in enumerate(shards):
        assert ran[f"all:{n}"]["code"] == 0, ran[f"all:{n}"]["output"]
        read = json.loads(ran[f"all:{n}"]["stdout"])
        assert read["snapshot"] == shard["digest"]
        seen += [r["metadata"]["hub"]["id"] for r in read["results"]]
    assert sorted(seen) == sorted(ids)
    assert ran["inspect"]["code"] == 0 and json.loads(ran["inspect"]["stdout"]) == last

    # Ours follows the index and reads every shard: one search over the whole catalog.
    assert ours.returncode == 0, ours.stderr
    found = json.loads(ours.stdout)
    assert (found["envs"], found["shards"], found["snapshot"]) == (150, len(shards), index["digest"])
    assert sorted(r["id"] for r in found["results"]) == sorted(ids)
    assert one.returncode == 0 and one.stdout.splitlines()[1].startswith("user52/env_00149  (100%)"), one.stdout
    assert f"of 150 envs in {len(shards)} shards; catalog {index['digest']}" in one.stdout


def test_a_superseded_revision_is_served_as_its_index_named_while_kept_then_refused(
    clean_factory, engine: Engine, hub_settings: HubSettings, run_cli
) -> None:
    """A reader holding an index gets the very shards it names though the catalog changed since, for
    `catalog_shards_keep_s` after that index was read (the shards are kept as files, per revision);
    past that, a shard of a revision that is no longer current is refused."""
    seed_passing_envs(engine, 60)
    store = hub_settings.data_dir / "catalog-shards"
    with _hub(hub_settings, 32 * 1024) as url:
        index, bodies = _shards(url)
        again, _ = _shards(url)
        assert sorted(p.name for p in (store / index["revision"]).iterdir()) == sorted(
            ["index.json", *(f"{n}.json" for n in range(len(bodies)))]
        )
        with engine.begin() as conn:  # a maintainer deprecates an env: its entry, and so the catalog, changes
            conn.execute(update(EnvRecord).where(EnvRecord.name == "env_00007").values(deprecated=True))
        kept = httpx.get(url + index["shards"][1]["url"], timeout=60)
        plain = httpx.get(f"{url}/api/v1/catalog/snapshot", timeout=60)
    assert again == index  # the same catalog makes the same shards
    assert kept.status_code == 200 and kept.content == bodies[1]
    assert kept.headers["openenv-catalog-revision"] == index["revision"]
    # Asked for no revision, the Hub serves the current catalog, made from the database.
    changed = json.loads(plain.content)
    assert changed["source"]["revision"] == plain.headers["openenv-catalog-revision"] != index["revision"]

    with _hub(hub_settings, 32 * 1024, catalog_shards_keep_s=0) as url:
        stale = httpx.get(url + index["shards"][1]["url"], timeout=60)
        now, _ = _shards(url)
        ours = run_cli("discover", "--hub", url, "--json", "--limit", "100")
    assert stale.status_code == 409
    error = stale.json()["error"]
    assert (error["code"], error["reason"], error["revision"]) == ("conflict", "catalog_changed", now["revision"])
    assert "GET /api/v1/catalog/index" in error["message"]
    assert now["revision"] != index["revision"] and now["envs"] == 60
    assert ours.returncode == 0 and json.loads(ours.stdout)["envs"] == 60, ours.stderr
    # Making the new revision's shards deleted the old ones, past their time.
    assert sorted(p.name for p in store.iterdir()) == [now["revision"]]


def test_kept_shards_are_bounded_on_disk(clean_factory, engine: Engine, hub_settings: HubSettings) -> None:
    """Making a revision's shards leaves KEPT_MOST revision folders at most (the newest), and deletes a
    folder a stopped process left half made."""
    from hub_service.catalog.shard_store import KEPT_MOST, STALE_BUILD_S

    seed_passing_envs(engine, 20)
    store = hub_settings.data_dir / "catalog-shards"
    now = time.time()
    others = {f"{n:064x}": now - 10 * (n + 1) for n in range(KEPT_MOST + 2)}  # all within catalog_shards_keep_s
    left = {".making-left": now - STALE_BUILD_S - 60, ".making-now": now - 5}
    for name, when in {**others, **left}.items():
        (store / name).mkdir(parents=True)
        (store / name / "index.json").write_text("{}")
        os.utime(store / name, (when, when))
    with _hub(hub_settings, 32 * 1024) as url:
        index, _ = _shards(url)
    newest = sorted(others, key=others.__getitem__, reverse=True)[: KEPT_MOST - 1]
    assert sorted(p.name for p in store.iterdir()) == sorted([index["revision"], *newest, ".making-now"])


def test_an_entry_too_large_for_any_shard_is_left_out_and_named(
    clean_factory, engine: Engine, hub_settings: HubSettings, run_cli
) -> None:
    seed_passing_envs(engine, 30)
    with engine.begin() as conn:  # two tags of 8,000 characters: an entry of 17 KB, over a 16 KiB limit
        conn.execute(update(EnvRecord).where(EnvRecord.name == "env_00005").values(tags=["x" * 8000, "y" * 8000]))
    with _hub(hub_settings, 16 * 1024) as url:
        index, bodies = _shards(url)
        ours = run_cli("discover", "--hub", url, "--json", "--limit", "100")
    (left,) = index["left_out"]
    assert left["path"] == "envs/user5--env_00005" and left["bytes"] > 16 * 1024
    listed = [e["displayName"] for body in bodies for e in json.loads(body)["entries"]]
    assert index["envs"] == len(listed) == 29 and "user5/env_00005" not in listed
    assert ours.returncode == 0 and json.loads(ours.stdout)["envs"] == 29, ours.stderr


def test_ours_refuses_a_shard_that_is_not_the_one_its_index_names(
    clean_factory, engine: Engine, hub_settings: HubSettings, run_cli
) -> None:
    """A Hub (here, one that replays what a real Hub served) whose shard differs from its index:
    refused, whether the shard's own digest was made to match or not; a shard answered with
    `catalog_changed` is read again from a new index."""
    seed_passing_envs(engine, 60)
    with _hub(hub_settings, 32 * 1024) as url:
        index, bodies = _shards(url)
    assert len(bodies) >= 3
    served = {s["first"] if n else None: body for n, (s, body) in enumerate(zip(index["shards"], bodies, strict=True))}
    second = index["shards"][1]["first"]
    behaviour: dict[str, Any] = {"mode": "honest", "changed": 0}
    app = FastAPI()

    @app.get("/api/v1/catalog/index")
    def index_route() -> Response:
        return Response(json.dumps(index), media_type="application/json")

    @app.get("/api/v1/catalog/snapshot")
    def shard_route(request: Request) -> Response:
        first = request.query_params.get("from")
        body = served[first]
        if first == second and behaviour["mode"] == "changed" and not behaviour["changed"]:
            behaviour["changed"] += 1
            error = {"code": "conflict", "message": "the catalog changed", "reason": "catalog_changed"}
            return Response(json.dumps({"error": error}), status_code=409, media_type="application/json")
        if first == second and behaviour["mode"].startswith("tampered"):
            snapshot = json.loads(body)
            snapshot["entries"][0]["description"] = "Mines cryptocurrency."
            if behaviour["mode"] == "tampered-and-digest-remade":
                snapshot["digest"] = _digest(snapshot)
            body = json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False).encode()
        return Response(body, media_type="application/json")

    runs = {}
    with serve_app(app) as fake:
        for mode in ("tampered-and-digest-remade", "tampered", "changed"):
            behaviour["mode"] = mode
            runs[mode] = run_cli("discover", "echo", "--hub", fake, "--json", "--limit", "100")
    remade = runs["tampered-and-digest-remade"]
    assert remade.returncode == 1, remade.stdout
    assert f"shard 2 of {len(bodies)} ({fake}/api/v1/catalog/snapshot?from=" in remade.stderr
    assert "is not the shard its index names" in remade.stderr and index["shards"][1]["digest"] in remade.stderr
    assert runs["tampered"].returncode == 1 and "does not match its digest" in runs["tampered"].stderr
    assert runs["changed"].returncode == 0 and behaviour["changed"] == 1, runs["changed"].stderr
    assert json.loads(runs["changed"].stdout)["envs"] == 60


def test_upstreams_discover_reads_each_shard_straight_from_the_hub(tmp_path: Path, upstream010_python: str) -> None:
    """The loop docs/hub-api.md shows, run as shown: curl, jq, and upstream's `openenv` on PATH."""
    with _own_hub(tmp_path, 100, catalog_shard_bytes=128 * 1024) as (url, _, _):
        index, _ = _shards(url)
        loop = subprocess.run(
            ["bash", "-c", "set -o pipefail\n" + UPSTREAM_LOOP.replace("http://127.0.0.1:7860", url)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,  # upstream's `openenv` first on PATH, and no `openenv` package of ours in reach
            env={**os.environ, "PATH": f"{Path(upstream010_python).parent}{os.pathsep}{os.environ['PATH']}"},
        )
    shards = index["shards"]
    assert loop.returncode == 0, loop.stderr[-3000:]
    piped = _documents(loop.stdout)
    assert len(shards) == 2 and [d["snapshot"] for d in piped] == [s["digest"] for s in shards]
    assert all(len(d["results"]) == min(20, s["envs"]) for d, s in zip(piped, shards, strict=True))
    assert all(r["description"].startswith("Echoes each message back") for d in piped for r in d["results"])


@pytest.mark.timeout(300)
def test_at_hugging_face_scale_50000_envs_are_shards_upstreams_discover_reads_whole(
    tmp_path: Path, upstream010_python: str, run_cli
) -> None:
    """The production cap with the real data volume of a Hub of Hugging Face's size: 50,000 envs of
    echo_env's size (80 MB, which upstream refuses in one document) are five shards within 16 MiB,
    each but the last filled to within a few KB of it; upstream's own `discover` accepts each whole
    (its digest is the one the index names) and finds its first and its last env; ours reads all."""
    with _own_hub(tmp_path, 50_000) as (hub, settings, _):
        index, bodies = _shards(hub)
        ours = run_cli("discover", "env 49999", "--hub", hub, "--json", timeout=300)
    shards = index["shards"]
    assert settings.catalog_shard_bytes == 16 * MIB == index["max_bytes"]
    assert len(shards) == 5 and index["envs"] == 50_000 and index["left_out"] == []
    assert all(16 * MIB - 4096 < len(body) <= 16 * MIB for body in bodies[:-1]) and len(bodies[-1]) <= 16 * MIB
    assert sum(len(b) for b in bodies) > 5 * 16 * MIB - 16 * MIB  # the catalog is far over one document
    ends = {}
    for n, body in enumerate(bodies):
        (tmp_path / f"shard-{n}.json").write_bytes(body)
        ids = [e["metadata"]["hub"]["id"] for e in json.loads(body)["entries"]]
        ends[n] = sorted({ids[0], ids[-1]})
    plan = {
        f"ends:{n}": ["discover", " ".join(i.split("_")[-1] for i in ends[n]), "--catalog", f"shard-{n}.json", "--json"]
        for n in range(len(bodies))
    }
    ran = _upstream(upstream010_python, tmp_path, plan)
    assert ran["max_catalog_bytes"] == settings.catalog_shard_bytes  # our default is upstream's own limit
    for n, shard in enumerate(shards):
        assert ran[f"ends:{n}"]["code"] == 0, ran[f"ends:{n}"]["output"]
        found = json.loads(ran[f"ends:{n}"]["stdout"])
        assert found["snapshot"] == shard["digest"]
        assert sorted(r["metadata"]["hub"]["id"] for r in found["results"]) == ends[n]
    assert ours.returncode == 0, ours.stderr
    read = json.loads(ours.stdout)
    assert (read["envs"], read["shards"], read["snapshot"]) == (50_000, 5, index["digest"])
    assert read["results"][0]["id"] == "user44/env_49999"
