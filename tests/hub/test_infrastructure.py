"""Infrastructure trouble is never blamed on an env: a revision the machine could not check (no
Docker engine, a base image that cannot be pulled) waits for it, with the reason, and runs again
by itself when the cause is fixed; `openenv hub rerun` runs it again at once."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import delete, select

from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.pipeline.worker import Worker
from hub_service.queue.models import Job
from hub_service.settings import HubSettings
from tests.support.dockerd import engine_past_its_start_up
from tests.support.servers import ROOT
from tests.support.socket_relay import SocketRelay
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _copy_echo(settings: HubSettings) -> Path:
    root = Path(settings.local_source)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _one(factory, model):
    with factory() as s:
        return s.scalar(select(model))


def _base_image() -> str:
    image = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not image:
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    return image


def test_no_engine_makes_the_revision_wait_then_it_passes_when_the_engine_answers(
    clean_factory, hub_settings, monkeypatch
) -> None:
    _base_image()
    sock_dir = Path(tempfile.mkdtemp(prefix="oe-engine-"))
    relay = SocketRelay(sock_dir / "docker.sock")
    # Nobody answers there yet. `openenv.engines` keeps one engine (and client) per host, so this
    # one is made anew for the relay and the process's usual engine is left as it was.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{relay.path}")
    settings = hub_settings.model_copy(
        update={"builder": "docker", "infra_retry_s": 60.0, "infra_retry_max_s": 600.0, "infra_probe_s": 0.1}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    worker = Worker(settings, clean_factory)
    try:
        assert worker.run_once() == "waiting"
        version, env, job = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord), _one(clean_factory, Job)
        assert (version.state, version.waiting_code, env.status) == ("waiting", "no_engine", "waiting")
        assert version.failure_stage is None and version.failure_reason is None
        assert "Docker engine" in version.waiting_reason and version.waiting_since is not None
        # Backoff, and no attempt used: a machine without an engine can wait for as long as it takes.
        assert job.state == "queued" and job.attempts == 0 and job.infra_retries == 1 and job.run_after is not None
        with clean_factory() as s:
            build = s.scalar(select(StageRun).where(StageRun.stage == "build"))
            kinds = [e.kind for e in s.scalars(select(EnvEvent).order_by(EnvEvent.id))]
        assert build.status == "failed" and "not the env's failure" in build.log
        assert kinds[-1] == "waiting" and "failed" not in kinds
        assert worker.run_once() is None  # not due yet (60 s), and the engine still does not answer
        assert _one(clean_factory, Job).run_after is not None

        relay.start()  # the engine answers: the idle worker notices and runs the revision now
        time.sleep(0.2)  # the worker's next look (infra_probe_s)
        outcomes = worker.run_until_idle(max_wait_s=5)
        assert outcomes == ["passed"]
        version, env = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord)
        assert (version.state, env.status, version.waiting_code, version.waiting_reason) == (
            "passed",
            "passing",
            None,
            None,
        )
        assert _one(clean_factory, Job).attempts == 1
    finally:
        relay.stop()


def test_a_base_image_that_cannot_be_pulled_waits_with_what_to_do(clean_factory, hub_settings) -> None:
    _base_image()
    settings = hub_settings.model_copy(
        update={"builder": "docker", "base_image": "openenv-local/no-such-base:1", "infra_retry_s": 30.0}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    version, env = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord)
    assert (version.state, version.waiting_code, env.status) == ("waiting", "base_image", "waiting")
    assert (
        "openenv-local/no-such-base:1" in version.waiting_reason and "OPENENV_HUB_BASE_IMAGE" in version.waiting_reason
    )


def test_a_build_network_without_dns_waits_but_an_unknown_host_is_the_envs_failure(clean_factory, hub_settings) -> None:
    base = _base_image()
    engine_past_its_start_up()  # the typo below is the env's own failure, on an engine up a while
    root = _copy_echo(hub_settings)
    dockerfile = (
        root / "echo_env" / "Dockerfile"
    )  # a step of its own, so that no earlier build's layers stand in for pip's
    dockerfile.write_text(
        dockerfile.read_text().replace("COPY . /app/env", f"RUN echo {uuid.uuid4().hex}\nCOPY . /app/env")
    )
    # No resolver on the build network (an outage): pip cannot resolve PyPI, and neither can the probe.
    settings = hub_settings.model_copy(update={"builder": "docker", "build_network": "none", "infra_retry_s": 30.0})
    index_source(clean_factory, LocalSource(root))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    version = _one(clean_factory, EnvVersion)
    assert version.waiting_code == "network" and "pypi.org" in version.waiting_reason, version.waiting_reason
    assert version.failure_reason is None and _one(clean_factory, EnvRecord).status == "waiting"

    # A typo in the env's own index URL: the name does not exist, which is the env's doing.
    dockerfile.write_text(
        dockerfile.read_text().replace(
            'RUN pip install --no-cache-dir "${OPENENV_SDK}"',
            'RUN pip install --index-url https://no-such-index.invalid/simple "${OPENENV_SDK}"',
        )
    )
    with clean_factory.begin() as s:
        s.execute(delete(Job))
        s.execute(delete(StageRun))
        s.execute(delete(EnvEvent))
        s.execute(delete(EnvVersion))
        s.execute(delete(EnvRecord))
    index_source(clean_factory, LocalSource(root))
    usual = settings.model_copy(update={"build_network": None, "base_image": base})
    assert Worker(usual, clean_factory).run_once() == "failed"
    version = _one(clean_factory, EnvVersion)
    assert (version.state, version.failure_stage, version.waiting_code) == ("failed", "build", None)
    assert _one(clean_factory, EnvRecord).status == "failing"


def test_hub_rerun_runs_waiting_and_failed_revisions_now(clean_factory, hub_settings, run_cli, tmp_path: Path) -> None:
    base = _base_image()
    settings = hub_settings.model_copy(
        update={"builder": "docker", "base_image": "openenv-local/no-such-base:1", "infra_retry_s": 600.0}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    env = {"OPENENV_HUB_DATABASE_URL": settings.sqlalchemy_url, "OPENENV_HUB_LOCAL_SOURCE": settings.local_source or ""}

    bad = run_cli("hub", "rerun", "local", env=env)
    assert bad.returncode == 2 and "owner/name" in bad.stderr
    missing = run_cli("hub", "rerun", "local/echo_envv", env=env)
    assert missing.returncode == 1 and "did you mean local/echo_env" in missing.stderr

    # The operator made the base image available: the waiting revision runs now, not in 10 minutes.
    done = run_cli("hub", "rerun", "local/echo_env", "--json", env=env)
    assert done.returncode == 0, done.stderr
    queued = json.loads(done.stdout)["queued"]
    assert [q["env"] for q in queued] == ["local/echo_env"] and "runs again now" in queued[0]["summary"]
    assert _one(clean_factory, Job).run_after is None
    fixed = settings.model_copy(update={"base_image": base})
    assert Worker(fixed, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]

    assert json.loads(run_cli("hub", "rerun", "--failed", "--json", env=env).stdout) == {"queued": []}
    with clean_factory.begin() as s:  # say the revision had failed (an older Hub blamed the env for the machine)
        version = s.scalar(select(EnvVersion))
        version.state, version.failure_stage, version.failure_reason = "failed", "build", "no Docker engine reachable"
        s.scalar(select(EnvRecord)).status = "failing"
    again = run_cli("hub", "rerun", "--failed", env=env)
    assert (
        again.returncode == 0
        and "local/echo_env" in again.stdout
        and "queued for the pipeline again (was failed)" in again.stdout
    )
    assert _one(clean_factory, EnvVersion).state == "queued"
    busy = run_cli("hub", "rerun", "local/echo_env", env=env)
    assert busy.returncode == 1 and "already queued or running" in busy.stderr
    assert Worker(fixed, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]
    assert _one(clean_factory, EnvRecord).status == "passing"
