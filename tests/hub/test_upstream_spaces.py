"""Spaces made with upstream OpenEnv's tooling, as they are (tests/fixtures/upstream: our own
folders in each upstream shape), through the whole Hub: indexed from a Hugging Face Hub (the
stand-in), validated, built with BuildKit (cache mounts, `server/Dockerfile`, a base image no
registry here serves), smoke-tested on their own port, played, and run by `from_hub` through the
Hub while huggingface.co (here: the stand-in) cannot be reached.

Their dependencies (upstream's `openenv` and what it needs) come from PyPI during the build.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import HfSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.support.dockerd import engine_past_its_start_up
from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT, serve_app
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SHAPES = ROOT / "tests" / "fixtures" / "upstream"
# Each shape and what the Hub must make of it.
PASSING = (
    "template_env",
    "pushed_env",
    "package_env",
    "port_env",
    "rejecting_env",
    "union_env",
    "tools_env",
    "selfimport_env",
)
FAILING = ("raising_env",)  # every step raises inside the env: no step succeeds (docs/validate.md)


def _files(name: str) -> dict[str, bytes]:
    folder = SHAPES / name
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    }


class UpstreamHub:
    def __init__(self, settings: HubSettings, factory: Any, hf: HubStandIn, outcomes: list[str]) -> None:
        self.settings, self.factory, self.hf, self.outcomes = settings, factory, hf, outcomes

    def versions(self) -> dict[str, EnvVersion]:
        with self.factory() as s:
            rows = s.execute(
                select(EnvRecord.name, EnvVersion).join(EnvVersion, EnvVersion.env_id == EnvRecord.id)
            ).all()
        return {name: version for name, version in rows}

    def stage_log(self, name: str, stage: str) -> str:
        version = self.versions()[name]
        with self.factory() as s:
            run = s.scalars(
                select(StageRun)
                .where(StageRun.version_id == version.id, StageRun.stage == stage)
                .order_by(StageRun.id.desc())
            ).first()
        return run.log if run is not None else ""


@pytest.fixture(scope="module")
def upstream_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamHub]:
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    engine_past_its_start_up()  # some shapes fail for their own reasons: on an engine up a while
    work = tmp_path_factory.mktemp("upstream-hub")
    url = f"sqlite:///{work / 'hub.sqlite3'}"
    migrate(url)
    factory = sessionmaker_for(make_engine(url))
    with HubStandIn(work / "hf") as hf:
        for name in (*PASSING, *FAILING, "wrapped_dep_env", "no_front_matter_env"):
            # Paused on "huggingface.co": no running Space to reach (and no address outside this machine is ever tried).
            hf.create_space(f"alice/{name}", files=_files(name), stage="PAUSED")
        # The Hub's own base image (as scripts/serve sets it): upstream's ghcr.io base is out of reach here.
        settings = HubSettings(
            data_dir=work / "data",
            database_url=url,
            local_source=None,
            hf_enabled=True,
            hf_endpoint=hf.url,
            hf_token=SecretStr(hf.token),
            builder="container",
            base_image=base,
            smoke_timeout_s=90,
            build_timeout_s=900,
            # This module's own image names, removed when it ends (each run's revisions are new images:
            # left behind, 14 runs had piled up 49 images a Space).
            image_prefix=f"openenv-hub-upstream-{os.getpid()}",
        )
        index_source(factory, HfSource(hf.url, hf.token))
        outcomes = Worker(settings, factory).run_until_idle()
        try:
            yield UpstreamHub(settings, factory, hf, outcomes)
        finally:
            import docker

            from tests.support.images import remove_tagged

            remove_tagged(docker.from_env(), settings.image_prefix)


@pytest.mark.timeout(1800)  # the module's Spaces build first (their layers shared); minutes on a busy machine
def test_upstream_shapes_build_and_pass_the_smoke_test(upstream_hub: UpstreamHub) -> None:
    versions = upstream_hub.versions()
    verdicts = {name: (v.state, v.failure_stage, v.failure_reason) for name, v in versions.items()}
    for name in PASSING:
        assert verdicts[name][0] == "passed", (
            name,
            verdicts[name],
            upstream_hub.stage_log(name, verdicts[name][1] or "smoke")[-3000:],
        )
        assert versions[name].builder == "container" and versions[name].step_p50_ms
    # BuildKit built them: the cache mounts of upstream's template, from server/Dockerfile when that is where it is.
    build = upstream_hub.stage_log("template_env", "build")
    assert "from server/Dockerfile" in build and "with buildkit" in build and "--mount=type=cache" in build
    assert "from Dockerfile" in upstream_hub.stage_log("pushed_env", "build")
    assert versions["port_env"].port == 7860 and versions["template_env"].port == 8000
    assert "127.0.0.1" in upstream_hub.stage_log("port_env", "smoke")


def test_schema_true_episodes_decide_the_verdict(upstream_hub: UpstreamHub) -> None:
    """Union actions carry their tag, an MCP env's tools are listed and called with valid arguments,
    and an env that raises on every step fails; each step's request and answer is in the stage log."""
    union = upstream_hub.stage_log("union_env", "smoke")
    assert '"kind": "place"' in union and '"kind": "pass"' in union and "VALIDATION_ERROR" not in union
    tools = upstream_hub.stage_log("tools_env", "smoke")
    assert 'tools/list: ok → ["price", "change", "submit"]' in tools, tools[-3000:]
    for name in ("price", "change", "submit"):
        assert f'"tool_name": "{name}"' in tools
    assert "tool_not_found" not in tools and "invalid_args" not in tools
    raising = upstream_hub.versions()["raising_env"]
    assert (raising.state, raising.failure_stage) == ("failed", "smoke"), (raising.state, raising.failure_reason)
    assert "no step succeeded" in (raising.failure_reason or "") and "NO_STEP_SUCCEEDED" in (
        raising.failure_reason or ""
    )
    log = upstream_hub.stage_log("raising_env", "smoke")
    assert 'step 1: sent {"guess": 1}' in log and "has no attribute 'model_dump'" in log


def test_an_env_that_rejects_some_actions_passes_with_the_rejections_recorded(upstream_hub: UpstreamHub) -> None:
    smoke = upstream_hub.stage_log("rejecting_env", "smoke")
    assert "rejected by the env" in smoke and "illegal move" in smoke
    with upstream_hub.factory() as s:
        event = s.scalars(
            select(EnvEvent)
            .where(EnvEvent.kind == "smoke_tested")
            .join(EnvRecord, EnvRecord.id == EnvEvent.env_id)
            .where(EnvRecord.name == "rejecting_env")
        ).one()
    assert event.details["rejected_actions"] >= 1 and "illegal move" in event.details["first_rejection"]


def test_what_cannot_work_fails_with_the_missing_thing_named(upstream_hub: UpstreamHub) -> None:
    versions = upstream_hub.versions()
    wrapped = versions["wrapped_dep_env"]
    # It needs a package no index has: it fails (never waits: the registry answered), and the reason names the package.
    assert wrapped.state == "failed" and wrapped.failure_stage == "build", (
        wrapped.failure_stage,
        wrapped.failure_reason,
    )
    assert "some-missing-module-xyz" in (wrapped.failure_reason or "").replace("_", "-")
    # A Space without README front matter has no tags (the Hub reads them from there), so no `openenv` tag: it is
    # not an OpenEnv Space to index. (As a source folder the validator only warns: `openenv push` writes it.)
    assert "no_front_matter_env" not in versions


def test_resolve_play_and_from_hub_use_the_envs_own_port_without_huggingface(
    upstream_hub: UpstreamHub, monkeypatch
) -> None:
    settings = upstream_hub.settings.model_copy(update={"play_instance_linger_s": 0.0})
    with serve_app(create_app(settings, run_migrations=False)) as url:
        record = httpx.get(f"{url}/api/v1/envs/alice/port_env/resolve", timeout=10).json()
        assert record["port"] == 7860 and record["local"]["container"].startswith(
            "docker run --rm -p 127.0.0.1:7860:7860 "
        )
        text = json.dumps(record)
        assert str(settings.data_dir) not in text and "/tmp" not in text  # no path of the Hub's machine

        # from_hub through the Hub, with the Hugging Face Hub unreachable: the record's image, on its port.
        from openenv import GenericEnvClient

        monkeypatch.setenv("OPENENV_HUB_URL", url)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
        with GenericEnvClient.from_hub("alice/port_env", trust_remote_code=True).sync() as env:
            steps = dict(env.resolution)
            assert steps["container"].startswith("connected to http://127.0.0.1:"), env.resolution
            assert steps["hub"].startswith("the service knows it") and "no running endpoint" in steps["hub"], steps
            assert "could not be asked" in steps["space"], steps
            env.reset()
            assert env.state()["step_count"] == 0

    # Play, confined like the smoke test, on the env's own port.
    import asyncio

    from hub_service.play.sessions import PlayManager

    async def play() -> dict[str, Any]:
        manager = PlayManager(settings, upstream_hub.factory)
        try:
            session = await manager.open("tab", "visitor", "alice", "port_env")
            assert session.instance.target.how == "docker"
            await session.reset()
            from openenv.validation import example_from_schema

            return await session.step(example_from_schema(session.action_schema))
        finally:
            await manager.aclose()

    result = asyncio.run(play())
    assert "observation" in result

    # A visitor who closes a session and starts again at once, on the same server (still running:
    # it lingers), of an env that holds one session at a time and a closed one's place for a second
    # (tools_env): the new session waits for the place instead of being told the env is full.
    async def again() -> dict[str, Any]:
        manager = PlayManager(settings.model_copy(update={"play_instance_linger_s": 60.0}), upstream_hub.factory)
        try:
            first = await manager.open("tab", "visitor", "alice", "tools_env")
            await first.reset()
            assert await manager.close("tab") == 1
            second = await manager.open("tab", "visitor", "alice", "tools_env")
            assert second.instance is first.instance
            return await second.reset()
        finally:
            await manager.aclose()

    assert asyncio.run(again())["observation"]["metadata"]["question"] == "How much did ACME gain in 2024?"


# The shapes of issue 29 through the same pipeline on PostgreSQL (the module's Hub above runs on SQLite). Their
# images come from the layers built above (the same files), so this costs their smoke tests, not new builds.
ISSUE_29 = ("union_env", "tools_env", "selfimport_env", "raising_env")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_the_same_verdicts_on_postgresql(
    upstream_hub: UpstreamHub, clean_factory: Any, db_url: str, tmp_path: Any
) -> None:
    with HubStandIn(tmp_path / "hf") as hf:
        for name in ISSUE_29:
            hf.create_space(f"alice/{name}", files=_files(name), stage="PAUSED")
        settings = upstream_hub.settings.model_copy(
            update={
                "data_dir": tmp_path / "data",
                "database_url": db_url,
                "hf_endpoint": hf.url,
                "hf_token": SecretStr(hf.token),
            }
        )
        index_source(clean_factory, HfSource(hf.url, hf.token))
        Worker(settings, clean_factory).run_until_idle()
    pg = UpstreamHub(settings, clean_factory, hf, [])
    on_sqlite = upstream_hub.versions()
    verdicts = {n: (v.state, v.failure_stage) for n, v in pg.versions().items()}
    assert verdicts == {n: (on_sqlite[n].state, on_sqlite[n].failure_stage) for n in ISSUE_29}, verdicts
    assert verdicts["raising_env"] == ("failed", "smoke") and verdicts["union_env"] == ("passed", None)
    assert 'tools/list: ok → ["price", "change", "submit"]' in pg.stage_log("tools_env", "smoke")
