"""Discovery declarations: read leniently (a malformed field is a warning naming it) and searchable."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.catalog.discovery import read_discovery, validation_parts
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app


def _folder(tmp_path: Path, declaration: object, readme: str = "", pyproject: str = "") -> Path:
    folder = tmp_path / "env"
    folder.mkdir(exist_ok=True)
    text = declaration if isinstance(declaration, str) else json.dumps(declaration)
    (folder / "discovery.json").write_text(text)
    (folder / "README.md").write_text(readme)
    (folder / "pyproject.toml").write_text(pyproject)
    return folder


def _fields(record: dict[str, object]) -> list[str]:
    return [w["field"] for w in record["warnings"]]  # type: ignore[union-attr, index]


def test_each_malformed_field_is_a_warning_naming_it_and_the_rest_is_kept(tmp_path: Path) -> None:
    record = read_discovery(
        _folder(
            tmp_path,
            {
                "description": "Sort a warehouse's parcels by weight.",
                "tags": ["logistics", 7],
                "representative_queries": ["only one query"],
                "license": "not a licence (c)",
                "agent_tools": {"protocol": "mcp", "names": ["step", "pick"], "source": "server/tools.py"},
                "artifact_availability": "external",
                "homepage": "https://example.org",
            },
        )
    )
    assert record["description"] == "Sort a warehouse's parcels by weight."
    assert record["artifact_availability"] == "external"
    assert sorted(_fields(record)) == sorted(
        ["homepage", "tags", "representative_queries", "license", "agent_tools.names"]
    )
    assert all(w["message"].startswith(w["field"] + ":") for w in record["warnings"])  # type: ignore[union-attr]
    assert "tags" not in record and "agent_tools" not in record and "license" not in record


def test_broken_or_hostile_files_never_raise(tmp_path: Path) -> None:
    for text in ("{not json", "[1, 2]", "\xff\xfe", "[" * 100_000, "{}" + " " * 70_000):
        record = read_discovery(_folder(tmp_path, text))
        assert _fields(record) == ["discovery.json"], text[:20]
    big = read_discovery(_folder(tmp_path, "{}" + " " * 70_000))
    assert big["warnings"][0]["message"].startswith("discovery.json: is larger than")  # type: ignore[index]
    assert read_discovery(tmp_path / "nowhere") == {"warnings": []}


def test_license_falls_back_to_pyproject_then_readme_and_conflicts_are_unknown(tmp_path: Path) -> None:
    same = read_discovery(
        _folder(tmp_path, {}, "---\nlicense: mit\n---\n# x\n", '[project]\nname = "x"\nlicense = "MIT"\n')
    )
    assert (same["license"], same["license_origin"]) == ("MIT", "pyproject.toml")
    clash = read_discovery(_folder(tmp_path, {}, "---\nlicense: apache-2.0\n---\n", '[project]\nlicense = "MIT"\n'))
    assert clash["license"] == "unknown" and _fields(clash) == ["license"]
    requirement = read_discovery(_folder(tmp_path, {}, "", '[project]\ndependencies = ["openenv>=0.10", "numpy"]\n'))
    assert requirement["framework_requirement"] == "openenv>=0.10"


def test_validation_parts_keep_only_what_describes_the_env() -> None:
    manifest = {
        "validation": {
            "capabilities": ["tool_use", "", {"x": 1}, "vision"],
            "types": {"action": "WordleAction", "observation": 3},
            "task_distribution": {"easy": 2, "hard": 0.5, "odd": "many"},
            "reward": {"range": [0, 1]},
        }
    }
    assert validation_parts(manifest) == {
        "capabilities": ["tool_use", "vision"],
        "types": {"action": "WordleAction"},
        "task_distribution": {"easy": 2, "hard": 0.5},
    }
    assert validation_parts({"validation": "yes"}) == {} and validation_parts(None) == {}


def test_declared_queries_and_tags_feed_search(clean_factory, hub_settings, tmp_path: Path) -> None:
    index_source(clean_factory, ListSource([space(i) for i in range(3)]))
    folder = _folder(
        tmp_path,
        {"tags": ["scheduling"], "representative_queries": ["book a meeting room", "move a standup"]},
    )
    with clean_factory.begin() as session:
        env = session.scalar(select(EnvRecord).where(EnvRecord.name == "env_00001"))
        version = session.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
        version.state, version.discovery = "passed", read_discovery(folder)
        version.manifest = {
            "name": "rooms",
            "validation": {"capabilities": ["tool_use", "Multi Turn"], "task_distribution": {"book": 3, "move": 1}},
        }
        apply_verdict(env, version)
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        found = httpx.get(f"{url}/api/v1/envs", params={"q": "standup"}).json()
        tagged = httpx.get(f"{url}/api/v1/envs", params={"q": "#scheduling"}).json()
        capable = httpx.get(f"{url}/api/v1/envs", params=[("capability", "multi turn"), ("task", "book")]).json()
        neither = httpx.get(f"{url}/api/v1/envs", params={"capability": "vision"}).json()
        detail = httpx.get(f"{url}/api/v1/envs/user1/env_00001").json()
    assert [i["name"] for i in found["items"]] == ["env_00001"]
    assert [i["name"] for i in tagged["items"]] == ["env_00001"]
    assert [i["name"] for i in capable["items"]] == ["env_00001"] and neither["total"] == 0
    assert detail["discovery"]["representative_queries"] == ["book a meeting room", "move a standup"]
    assert detail["validation_parts"] == {
        "capabilities": ["tool_use", "Multi Turn"],
        "task_distribution": {"book": 3, "move": 1},
    }


def test_the_env_page_shows_what_the_env_is_for_and_escapes_it(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from hub_service.ui.discovery_view import discovery_lines

    record = read_discovery(
        _folder(
            tmp_path,
            {"representative_queries": ["<script>x</script>", "plan a trip"], "tags": "not a list"},
        )
    )
    manifest = {"validation": {"capabilities": ["tool_use"], "task_distribution": {"easy": 2, "hard": 0.5}}}
    html = discovery_lines(SimpleNamespace(discovery=record, manifest=manifest))
    assert "Good for: “&lt;script&gt;x&lt;/script&gt;” · “plan a trip”" in html and "<script>" not in html
    assert "Capabilities: tool_use" in html and "Tasks: easy (2), hard (0.5)" in html
    assert "discovery.json: tags: must be a list" in html
    assert discovery_lines(None) == "" and discovery_lines(SimpleNamespace(discovery=None, manifest=None)) == ""


def test_a_malformed_discovery_json_is_a_warning_never_a_failed_revision(tmp_path: Path) -> None:
    """The real pipeline (trusted local env, process builder: no image) reads the declaration.

    One database is enough here (a pipeline run is the cost; what it stores is a JSON column the
    tests above read on both)."""
    import shutil

    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.sources import LocalSource
    from hub_service.settings import HubSettings
    from hub_service.worker import Worker

    url = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(url)
    engine = make_engine(url)
    clean_factory = sessionmaker_for(engine)
    settings = HubSettings(
        data_dir=tmp_path / "data",
        database_url=url,
        local_source=str(tmp_path / "envs"),
        builder="process",
        website=False,
        determinism_check=False,
        reward_check=False,
        capacity_check=False,
    )
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    env = root / "echo_env"
    shutil.copytree(Path(__file__).parents[2] / "envs" / "echo_env", env, ignore=shutil.ignore_patterns("__pycache__"))
    (env / "discovery.json").write_text(
        json.dumps({"representative_queries": ["repeat what I say", "echo text back"], "agent_tools": {"names": []}})
    )
    index_source(clean_factory, LocalSource(root, trusted=True))
    assert Worker(settings, clean_factory).run_until_idle() == ["passed"]
    with clean_factory() as session:
        version = session.scalar(select(EnvVersion))
        assert version.state == "passed"
        assert version.discovery["representative_queries"] == ["repeat what I say", "echo text back"]
        assert _fields(version.discovery) == ["agent_tools.protocol"]
    with serve_app(create_app(settings, run_migrations=False)) as url:
        snapshot = httpx.get(f"{url}/api/v1/catalog/snapshot").json()
        found = httpx.get(f"{url}/api/v1/envs", params={"q": "repeat"}).json()
    assert [e["representativeQueries"] for e in snapshot["entries"]] == [["repeat what I say", "echo text back"]]
    assert [i["message"].split(":")[0] for i in snapshot["issues"]] == ["agent_tools.protocol"]
    assert [i["name"] for i in found["items"]] == ["echo_env"]
    engine.dispose()
