"""Publishing to a registry (issue 23): after the smoke test the Hub pushes the exact image it tested
to its registry (scripts/registry: a real distribution registry on 127.0.0.1 with htpasswd auth),
keeps the digest the registry reports, and the resolve record names the image by that digest.
A registry that is down or refuses the Hub's credentials makes the revision wait, never fail."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select, text

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.hub.test_rfc008_container import assert_container_checks_pass
from tests.support.registry import manifest_digest, private_registry, test_registry
from tests.support.servers import ROOT, serve_app

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def bundled_envs() -> set[str]:
    return {p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file()}


def _image_here(ref: str) -> bool:
    """Whether the selected engine (OPENENV_CONTAINER_ENGINE) holds `ref`."""
    import docker.errors

    from openenv.engines import engine

    try:
        engine().client().images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.mark.timeout(900)  # seven builds and smoke tests: a few minutes, more on a busy machine
def test_the_pipeline_publishes_every_bundled_env_to_the_registry_by_digest(tmp_path: Path) -> None:
    """On one database (SQLite) only: seven builds and smoke tests are the slow part, and what is
    written to the database is the same two columns the test below checks on both backends.
    tests/hub/test_podman_pipeline.py runs the same on Podman."""
    publish_every_bundled_env(tmp_path)


def publish_every_bundled_env(tmp_path: Path) -> None:
    """Validate, build, smoke-test and publish every bundled env on the selected engine
    (OPENENV_CONTAINER_ENGINE), and check what the registry and the resolve records say."""
    _needs_docker()
    registry = test_registry()
    namespace = f"{registry.host}/t{uuid.uuid4().hex[:10]}"  # this run's own repositories
    db = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(db)
    engine = make_engine(db)
    clean_factory = sessionmaker_for(engine)
    settings = HubSettings(
        data_dir=tmp_path / "hubdata",
        database_url=db,
        local_source=str(tmp_path / "envs"),
        base_image=os.environ.get("OPENENV_TEST_BASE_IMAGE"),
        builder="container",
        website=False,
        determinism_check=False,
        reward_check=False,
        capacity_check=False,
        registry=namespace,
        registry_user=registry.user,
        registry_password=SecretStr(registry.password),
    )
    wanted = bundled_envs()
    root = make_envs(Path(str(settings.local_source)), *sorted(wanted))
    assert index_source(clean_factory, LocalSource(root)).jobs == len(wanted)
    outcomes = Worker(settings, clean_factory).run_until_idle()
    found = verdicts(clean_factory)
    assert outcomes == ["passed"] * len(wanted), {n: v.failure_reason or v.waiting_reason for n, v in found.items()}

    repo_path = namespace.split("/", 1)[1]
    with serve_app(create_app(settings, run_migrations=False)) as url:
        for name in sorted(wanted):
            version = found[name]
            repository = f"{repo_path}/local/{name}"
            assert version.registry_ref == f"{namespace}/local/{name}:{version.sha}"
            assert version.image_digest and version.image_digest.startswith("sha256:")
            # The registry itself says the tag holds that digest, and only to a client with credentials.
            assert manifest_digest(registry, repository, version.sha) == (200, version.image_digest)
            assert manifest_digest(registry, repository, version.image_digest) == (200, version.image_digest)
            assert manifest_digest(registry, repository, version.sha, auth=False)[0] == 401
            record = httpx.get(f"{url}/api/v1/envs/local/{name}/resolve").json()
            assert record["image"] == f"{namespace}/local/{name}@{version.image_digest}"
            assert (record["image_digest"], record["image_tag"]) == (version.image_digest, version.registry_ref)
            assert record["local"]["container"].endswith(record["image"]) and record["yanked"] is False
            # The push's own tag is not left on the Hub's engine (its image GC tracks the Hub's tag only).
            assert not _image_here(version.registry_ref)
            assert version.image_ref and _image_here(version.image_ref)
            # The Hub measured the revision's container on this engine: network, containment, bounds.
            assert_container_checks_pass(name, version.rfc008)

        # A yanked revision keeps its image in the registry and its record, flagged.
        echo = found["echo_env"]
        with clean_factory.begin() as s:
            s.get(EnvVersion, echo.id).yanked = True
        record = httpx.get(f"{url}/api/v1/envs/local/echo_env/resolve", params={"revision": echo.sha}).json()
        assert record["yanked"] is True and record["image_digest"] == echo.image_digest
        assert manifest_digest(registry, f"{repo_path}/local/echo_env", echo.image_digest)[0] == 200
    engine.dispose()


def test_a_push_without_credentials_is_refused_by_the_registry(tmp_path: Path) -> None:
    """The registry's auth is real: the engine's push with no credentials gets nothing in."""
    _needs_docker()
    registry = test_registry()
    repository = f"{registry.host}/t{uuid.uuid4().hex[:10]}/anonymous"
    base = os.environ["OPENENV_TEST_BASE_IMAGE"]
    subprocess.run(["docker", "tag", base, f"{repository}:1"], check=True, timeout=60)
    try:
        out = subprocess.run(
            ["docker", "--config", str(tmp_path), "push", f"{repository}:1"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        subprocess.run(["docker", "rmi", f"{repository}:1"], capture_output=True, timeout=60)
    assert out.returncode != 0 and "no basic auth credentials" in out.stderr + out.stdout
    assert manifest_digest(registry, repository.split("/", 1)[1], "1")[0] == 404


def test_a_registry_down_or_refusing_makes_the_version_wait_and_it_passes_once_back(
    clean_factory, hub_settings: HubSettings, tmp_path: Path
) -> None:
    _needs_docker()
    root = make_envs(Path(hub_settings.local_source), "echo_env")
    assert index_source(clean_factory, LocalSource(root)).jobs == 1
    with private_registry(tmp_path / "registry") as (host, start, stop):
        base = hub_settings.model_copy(
            update={"builder": "container", "registry": host, "registry_user": "openenv", "infra_retry_s": 0.2}
        )

        def run(settings: HubSettings) -> tuple[str | None, EnvVersion, EnvRecord]:
            worker, deadline = Worker(settings, clean_factory), time.monotonic() + 30
            while (outcome := worker.run_once()) is None and time.monotonic() < deadline:
                time.sleep(0.1)  # the backoff of the run before (0.2 s, doubling)
            with clean_factory() as s:
                env = s.scalar(select(EnvRecord))
                version = s.scalar(select(EnvVersion))
                return outcome, version, env

        # Down: nothing listens on its port.
        outcome, version, env = run(base)
        assert outcome == "waiting" and version.state == "waiting" and version.waiting_code == "registry"
        assert version.failure_stage is None and env.status == "waiting", version.failure_reason
        assert version.image_digest is None and host in version.waiting_reason
        with clean_factory() as s:
            log = s.scalar(text("SELECT log FROM stage_runs WHERE stage = 'publish' ORDER BY id DESC"))
        assert "not the env's failure" in log

        # Up, but the Hub's password is wrong: the registry refuses it, and that is no fault of the env either.
        registry = start()
        wrong = base.model_copy(update={"registry_password": SecretStr("not-the-password")})
        outcome, version, env = run(wrong)
        assert outcome == "waiting" and version.waiting_code == "registry" and env.status == "waiting"
        assert "refused" in version.waiting_reason and "OPENENV_HUB_REGISTRY_PASSWORD" in version.waiting_reason

        # Back with the right credentials: the revision passes, with the digest the registry holds.
        right = base.model_copy(update={"registry_password": SecretStr(registry.password)})
        outcome, version, env = run(right)
        assert outcome == "passed" and version.state == "passed" and env.status == "passing"
        assert version.waiting_code is None and version.image_digest
        assert manifest_digest(registry, "local/echo_env", version.sha) == (200, version.image_digest)
        stop()
