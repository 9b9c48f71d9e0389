"""Play on the image the pipeline built (Docker builder): the visitor's session runs in a container
confined like a smoke test (unprivileged user, no capabilities, read-only root, the Hub's
labels), plays for real, and the container is gone when the last session leaves."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvVersion
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.play.sessions import PlayManager
from hub_service.sandbox import HUB_LABEL, hub_instance, smoke_process_cap
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from openenv.engines import engine
from openenv.engines.runtimes import observed_runtime
from tests.support.images import remove_tagged
from tests.support.servers import ROOT
from tests.support.systems import require_runsc, require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(params=["runc", "runsc"])
def docker_settings(
    clean_factory: sessionmaker[Session], hub_settings: HubSettings, request: pytest.FixtureRequest
) -> Iterator[HubSettings]:
    """A Hub whose Docker pipeline built and smoke-tested echo_env, under each sandbox runtime."""
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    if request.param == "runsc":
        require_runsc()
    import docker

    settings = hub_settings.model_copy(
        update={
            "builder": "container",
            "play_instance_linger_s": 0.0,
            "image_prefix": f"openenv-hub-play-{os.getpid()}",
            "sandbox_runtime": request.param,
        }
    )
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    index_source(clean_factory, LocalSource(root, trusted=True))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(Worker(settings, clean_factory).run_until_idle).result() == ["passed"]
    yield settings
    client = docker.from_env()
    remove_tagged(client, settings.image_prefix)


def _play_containers(settings: HubSettings) -> list[Any]:
    import docker

    return docker.from_env().containers.list(
        all=True, filters={"label": ["org.openenv.hub.play=1", f"{HUB_LABEL}={hub_instance(settings)}"]}
    )


async def test_a_visitor_plays_on_the_built_image_in_a_confined_container(
    docker_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    with clean_factory() as s:
        version = s.scalar(select(EnvVersion))
        assert version is not None and version.builder == "container" and version.image_ref
    play = PlayManager(docker_settings, clean_factory)
    try:
        session = await play.open("tab", "10.0.0.7", "local", "echo_env")
        assert session.instance.target.how == "docker"
        await session.reset()
        out = await session.step({"message": "from a container"})
        assert out["observation"]["echoed_message"] == "from a container"
        assert (await session.state())["step_count"] == 1
        [container] = _play_containers(docker_settings)
        config = container.attrs["HostConfig"]
        assert container.attrs["Config"]["User"] == "1000:1000" and config["ReadonlyRootfs"]
        runtime = docker_settings.sandbox_runtime
        assert config["CapDrop"] == ["ALL"] and config["Runtime"] == runtime
        cap = smoke_process_cap(docker_settings)
        assert config["PidsLimit"] == (cap * 32 if runtime == "runsc" else docker_settings.smoke_pids)
        seen = observed_runtime(container.client.api, container.id, engine())  # on the host, not the engine's word
        assert seen.gvisor is (runtime == "runsc"), seen.evidence
        assert container.attrs["Config"]["Image"] == version.image_ref
        published = [b["HostIp"] for binds in (config["PortBindings"] or {}).values() for b in binds]
        assert published and set(published) == {"127.0.0.1"}
        await play.close("tab")
        assert _play_containers(docker_settings) == []  # the last session left: its container is gone
    finally:
        await play.aclose()
    assert _play_containers(docker_settings) == []
