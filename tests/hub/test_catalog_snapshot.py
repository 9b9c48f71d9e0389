"""The catalog snapshot in upstream's Environment Card profile: what the Hub serves, and upstream
openenv 0.10.0's own `catalog inspect` and `discover --catalog` reading it (in its own venv)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog.discovery import read_discovery
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from tests.hub.helpers import ListSource, listing_hub, space

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted(p for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())
# A task phrase a user would type for each bundled env (none of them copies its description).
PHRASES = {
    "atari_env": "play atari 2600 games from the screen",
    "blackjack_env": "hit or stand at blackjack",
    "chess_env": "play chess against an engine",
    "coding_env": "run python code in a sandbox",
    "echo_env": "echo my message back",
    "grid_world_env": "walk to the goal on a grid",
    "wordle_env": "guess the five-letter word",
}
DECLARED = {
    "description": "Schedule meetings for a team across time zones without double booking.",
    "tags": ["calendar", "planning"],
    "representative_queries": ["find a slot for five people next week", "reschedule a clashing meeting"],
    "license": "apache-2.0",
    "agent_tools": {"protocol": "mcp", "names": ["list_calendars", "book"], "source": "server/tools.py"},
    "artifact_availability": "sometimes",  # malformed: a warning naming the field, the rest still read
}


def _pass(session: Session, name: str, folder: Path, digest: str | None = None) -> None:
    """Give the indexed env `name` a passed current revision made from `folder`, as the pipeline would."""
    env = session.scalar(select(EnvRecord).where(EnvRecord.name == name))
    assert env is not None
    version = session.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
    assert version is not None
    version.manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
    version.discovery = read_discovery(folder)
    version.state = "passed"
    if digest:
        version.registry_ref = f"127.0.0.1:5000/openenv/{name}:{version.sha}"
        version.image_digest = digest
    from hub_service.catalog.service import apply_verdict

    apply_verdict(env, version)


def _declared_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "calendar_env"
    folder.mkdir()
    (folder / "openenv.yaml").write_text(
        "spec_version: 1\nname: calendar_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
        "validation:\n  capabilities: [tool_use, multi_turn]\n  task_distribution: {book: 3, reschedule: 1}\n"
    )
    (folder / "discovery.json").write_text(json.dumps(DECLARED))
    return folder


def _spaces() -> list[Any]:
    spaces = [space(i, owner="openenv", name=p.name, tags=["openenv"]) for i, p in enumerate(BUNDLED)]
    spaces.append(space(50, owner="calendars", name="calendar_env", tags=["openenv"]))
    spaces.append(space(51, owner="calendars", name="broken_env"))  # indexed, never passed: not listed
    return spaces


def _prepare(tmp_path: Path) -> Any:
    def prepare(session: Session) -> None:
        for i, folder in enumerate(BUNDLED):
            _pass(session, folder.name, folder, digest="sha256:" + f"{i:x}" * 64 if i % 2 else None)
        _pass(session, "calendar_env", _declared_folder(tmp_path))

    return prepare


def _digest(snapshot: dict[str, Any]) -> str:
    body = {k: v for k, v in snapshot.items() if k != "digest"}
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


_UPSTREAM = """
import json, sys
from typer.testing import CliRunner
from openenv.cli.__main__ import app
catalog, plan = sys.argv[1], json.loads(sys.argv[2])
runner = CliRunner()
out = {}
for key, args in plan.items():
    result = runner.invoke(app, [*args, *(["--catalog", catalog] if args[0] != "catalog" or args[1] != "build" else [])])
    out[key] = {"code": result.exit_code, "stdout": result.stdout}
print(json.dumps(out))
"""


def _upstream(python: str, catalog: Path, plan: dict[str, list[str]]) -> dict[str, Any]:
    """Run upstream's own CLI commands (in its venv, one process for all of them)."""
    done = subprocess.run(
        [python, "-c", _UPSTREAM, str(catalog), json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=catalog.parent,  # not the repository root, whose `openenv` package would shadow upstream's
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_upstream_inspects_and_discovers_every_env_in_our_snapshot(tmp_path: Path, upstream010_python: str) -> None:
    with listing_hub(tmp_path, _spaces(), _prepare(tmp_path)) as (url, _):
        reply = httpx.get(f"{url}/api/v1/catalog/snapshot", timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    snapshot = reply.json()
    assert snapshot["digest"] == _digest(snapshot)
    assert snapshot["complete"] is True and snapshot["schema_version"] == "0.1-draft"
    by_id = {e["metadata"]["hub"]["id"]: e for e in snapshot["entries"]}
    assert set(by_id) == {f"openenv/{p.name}" for p in BUNDLED} | {"calendars/calendar_env"}
    # Bound to the revision that passed, and to the image it was published as where it was.
    echo = by_id["openenv/echo_env"]["metadata"]["hub"]
    assert echo["revision"] == f"{[p.name for p in BUNDLED].index('echo_env'):040x}"
    published = [e["metadata"]["hub"] for e in snapshot["entries"] if "image_digest" in e["metadata"]["hub"]]
    assert published and all(h["image"].endswith("@" + h["image_digest"]) for h in published)
    calendar = by_id["calendars/calendar_env"]
    assert calendar["representativeQueries"] == DECLARED["representative_queries"]
    assert calendar["data"]["license"] == "Apache-2.0" and calendar["capabilities"] == ["list_calendars", "book"]
    assert calendar["metadata"]["hub"]["validation"]["task_distribution"] == {"book": 3, "reschedule": 1}
    assert [i["path"] for i in snapshot["issues"]] == [calendar["data"]["source"]["path"]]
    assert "artifact_availability" in snapshot["issues"][0]["message"]

    path = tmp_path / "catalog.json"
    path.write_text(reply.text)
    plan = {f"discover:{name}": ["discover", phrase, "--json"] for name, phrase in PHRASES.items()}
    plan["discover:calendar"] = ["discover", "reschedule a meeting", "--json"]
    plan["inspect"] = ["catalog", "inspect", calendar["identifier"]]
    repo, built = _maze_repository(tmp_path), tmp_path / "upstream.json"
    plan["build"] = ["catalog", "build", "--repository", str(repo), "--output", str(built)]
    plan["build"] += ["--repository-uri", "https://github.com/example/envs.git", "--publisher", "example.org"]
    ran = _upstream(upstream010_python, path, plan)
    for name in PHRASES:
        found = ran[f"discover:{name}"]
        assert found["code"] == 0, found["stdout"]
        results = json.loads(found["stdout"])["results"]
        assert results[0]["metadata"]["hub"]["id"] == f"openenv/{name}", (name, [r["displayName"] for r in results])
    assert json.loads(ran["discover:calendar"]["stdout"])["results"][0]["displayName"] == "calendars/calendar_env"
    assert ran["inspect"]["code"] == 0 and json.loads(ran["inspect"]["stdout"]) == calendar

    # And the other way: our reader takes the snapshot upstream built (its digest checks out with ours).
    from openenv.cli import _catalog

    assert ran["build"]["code"] == 0, ran["build"]["stdout"]
    theirs = _catalog.search(_catalog.load_file(built), "escape a labyrinth")
    assert [m.entry["description"] for m in theirs] == [MAZE["description"]]


MAZE = {
    "description": "Find the exit of a seeded maze in as few moves as possible.",
    "tags": ["maze", "navigation"],
    "representative_queries": ["escape a labyrinth", "shortest path puzzle"],
    "license": "MIT",
}


def _maze_repository(tmp_path: Path) -> Path:
    """A Git repository with one env and its discovery.json, as upstream's `catalog build` reads them."""
    repo = tmp_path / "repo"
    env = repo / "envs" / "maze_env"
    env.mkdir(parents=True)
    (env / "openenv.yaml").write_text("spec_version: 1\nname: maze_env\ntype: space\nruntime: fastapi\n")
    (env / "discovery.json").write_text(json.dumps(MAZE))
    for args in (("init", "-q", "-b", "main"), ("add", "."), ("-c", "user.name=t", "-c", "user.email=t@example.org")):
        if args[0] == "-c":
            args = (*args, "commit", "-q", "-m", "maze")
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)
    return repo


def test_snapshot_on_both_databases_lists_passing_public_envs_and_tracks_changes(clean_factory, hub_settings) -> None:
    from hub_service.app import create_app
    from tests.support.servers import serve_app

    index_source(clean_factory, ListSource([space(i) for i in range(6)]))
    with clean_factory.begin() as session:
        for i in range(4):
            _pass(session, f"env_{i:05d}", BUNDLED[i])
        session.scalar(select(EnvRecord).where(EnvRecord.name == "env_00003")).private = True
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        first = httpx.get(f"{url}/api/v1/catalog/snapshot").json()
        again = httpx.get(f"{url}/api/v1/catalog/snapshot").json()
        with clean_factory.begin() as session:
            _pass(session, "env_00004", BUNDLED[4])
        after = httpx.get(f"{url}/api/v1/catalog/snapshot").json()
    assert [e["displayName"] for e in first["entries"]] == [f"user{i}/env_{i:05d}" for i in range(3)]
    assert first["inventory"] == {"root": "envs", "paths": [f"envs/user{i}--env_{i:05d}" for i in range(3)]}
    assert first == again and first["digest"] == _digest(first)  # same catalog, same snapshot
    assert len(after["entries"]) == 4 and after["source"]["revision"] != first["source"]["revision"]
    assert after["digest"] == _digest(after) and all(
        e["identifier"].endswith(":" + after["source"]["revision"]) for e in after["entries"]
    )


def test_export_catalog_writes_the_same_snapshot(clean_factory, hub_settings, tmp_path: Path) -> None:
    index_source(clean_factory, ListSource([space(i) for i in range(2)]))
    with clean_factory.begin() as session:
        _pass(session, "env_00001", BUNDLED[1])
    target = tmp_path / "out" / "catalog.json"
    target.parent.mkdir()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "openenv.cli", "hub", "export-catalog", "-o", str(target)),
            *("--database-url", hub_settings.sqlalchemy_url, "--data-dir", str(tmp_path / "data")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(target.read_text())
    assert [e["displayName"] for e in written["entries"]] == ["user1/env_00001"]
    assert written["digest"] == _digest(written) and "wrote the catalog snapshot" in done.stdout


def test_a_snapshot_of_5000_envs_streams_within_the_memory_bound(tmp_path: Path) -> None:
    """The Hub (and the reading client, in one process) stays under 200 MB serving 5,000 envs."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "catalog_snapshot.py"),
            "--envs",
            "5000",
            "--no-save",
            "--upstream-python",
            "",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["envs"] == 5000 and result["digest"].startswith("sha256:")
    assert result["bytes"] > 5000 * 1000  # every env is in it
    assert result["peak_rss_mb"] < 200, result
    assert result["peak_rss_mb"] - result["idle_rss_mb"] < 60, result  # streamed: an 8 MB body, never the whole
