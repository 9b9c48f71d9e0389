"""`openenv discover`: by task, from a Hub service directly or from a snapshot file, including one
the Hub served (tests/hub/test_catalog_snapshot.py checks ours reads one upstream's `catalog build` wrote)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.hub.helpers import listing_hub, space
from tests.hub.test_catalog_snapshot import BUNDLED, _pass
from tests.support.servers import ROOT


def _prepare(session) -> None:
    for folder in BUNDLED:
        _pass(session, folder.name, folder)


def test_discover_reads_the_hub_and_a_snapshot_file(run_cli, tmp_path: Path) -> None:
    spaces = [space(i, owner="openenv", name=p.name) for i, p in enumerate(BUNDLED)]
    with listing_hub(tmp_path, spaces, _prepare) as (url, _):
        found = run_cli("discover", "guess the five-letter word", "--hub", url, "--json")
        human = run_cli("discover", "play chess against an engine", "--hub", url)
        snapshot = httpx.get(f"{url}/api/v1/catalog/snapshot").text
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results[0]["id"] == "openenv/wordle_env" and results[0]["score"] == 100
    # Links are the Hub's public URL (its default here, http://127.0.0.1:7860), pinned to the revision.
    resolve = f"http://127.0.0.1:7860/api/v1/envs/openenv/wordle_env/resolve?revision={results[0]['revision']}"
    assert results[0]["resolve"] == resolve
    assert human.returncode == 0 and human.stdout.splitlines()[1].startswith("openenv/chess_env  (60%)  Chess")

    saved = tmp_path / "catalog.json"
    saved.write_text(snapshot)
    tagged = run_cli("discover", "--catalog", str(saved), "--tag", "openenv", "--limit", "3", "--json")
    assert tagged.returncode == 0 and len(json.loads(tagged.stdout)["results"]) == 3
    saved.write_text(snapshot.replace("Wordle", "Wordie"))
    tampered = run_cli("discover", "wordle", "--catalog", str(saved))
    assert tampered.returncode == 1 and "does not match its digest" in tampered.stderr
    nothing = run_cli("discover", "anything")
    assert nothing.returncode == 2 and "--hub" in nothing.stderr


def test_discover_filters_on_the_checks_the_hub_saw_pass(run_cli, tmp_path: Path) -> None:
    """Each entry carries its RFC 008 report in short (metadata.hub.checks); `--check ID` keeps
    the envs whose report passed ID. echo_env's report here comes from a copy without its
    `validation:` block, so static.manifest failed for it."""
    import shutil

    import yaml
    from sqlalchemy import select

    from hub_service.catalog.models import EnvRecord, EnvVersion
    from openenv.validation.rfc008 import validate_package

    bare = tmp_path / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", bare, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = yaml.safe_load((bare / "openenv.yaml").read_text())
    del manifest["validation"]
    (bare / "openenv.yaml").write_text(yaml.safe_dump(manifest))

    def prepare(session) -> None:
        _prepare(session)
        for env in session.scalars(select(EnvRecord)):
            version = session.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            folder = bare if env.name == "echo_env" else ROOT / "envs" / env.name
            version.rfc008 = validate_package(folder, import_app=False)[0].model_dump(mode="json")

    spaces = [space(i, owner="openenv", name=p.name) for i, p in enumerate(BUNDLED)]
    with listing_hub(tmp_path / "hub", spaces, prepare) as (url, _):
        everything = run_cli("discover", "--hub", url, "--json", "--limit", "50")
        declared = run_cli("discover", "--hub", url, "--json", "--limit", "50", "--check", "static.manifest")
        typo = run_cli("discover", "--hub", url, "--check", "static.manfest")
    ids = [r["id"] for r in json.loads(everything.stdout)["results"]]
    kept = [r["id"] for r in json.loads(declared.stdout)["results"]]
    assert "openenv/echo_env" in ids and len(ids) == len(BUNDLED)
    assert kept == [i for i in ids if i != "openenv/echo_env"]
    verdicts = {r["id"]: r["verdict"] for r in json.loads(everything.stdout)["results"]}
    assert verdicts["openenv/echo_env"] == "fail" and verdicts["openenv/chess_env"] == "warn"
    assert typo.returncode == 2 and "did you mean static.manifest?" in typo.stderr
