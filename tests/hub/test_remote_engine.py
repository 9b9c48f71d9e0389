"""A container engine on another machine (issue 48): reached over TCP (`DOCKER_HOST=tcp://...`), it
builds, smoke-tests and serves play sessions, the Hub names in the smoke log what it cannot
guarantee there, and it takes nothing of this machine's kernel as evidence about it.

The engine elsewhere is the tests' second engine on its TCP address (scripts/docker-engine2). Its
containers do run on this machine, which makes the tests sharp: their processes are here to be
misread, and the Hub must not read them (an engine over TCP is another machine's, by the port's rule).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from openenv.engines import ContainerEngine, engine
from openenv.engines.host import view
from openenv.engines.runtimes import observed_runtime
from tests.hub.test_rfc008_container import CONTAINER_CHECKS
from tests.support.images import remove_tagged
from tests.support.servers import ROOT
from tests.support.systems import use_remote_engine

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> ContainerEngine:
    """The engine elsewhere, which `openenv.engines` now selects (DOCKER_HOST)."""
    host = use_remote_engine(monkeypatch)
    eng = engine()
    assert eng.host == host
    return eng


def test_the_port_takes_an_engine_over_tcp_to_be_another_machines(remote: ContainerEngine) -> None:
    assert remote.local is False and remote.address == "127.0.0.1"
    assert remote.cli_env({"DOCKER_HOST": "unix:///elsewhere.sock"})["DOCKER_HOST"] == remote.host
    lines = remote.unenforced()
    assert len(lines) == 3 and all(str(remote.host) in line for line in lines)
    # The same engine through its unix socket is this machine's: nothing is left unenforced there.
    socket = engine(host=os.environ["OPENENV_TEST_DOCKER2_HOST"])
    assert socket.local is True and socket.unenforced() == []


def test_a_container_elsewhere_is_never_measured_through_this_machines_proc(remote: ContainerEngine) -> None:
    client = remote.client()
    container = client.containers.run(
        os.environ["OPENENV_TEST_BASE_IMAGE"], ["sleep", "60"], detach=True, labels={"org.openenv.test": "remote"}
    )
    try:
        info = client.api.inspect_container(container.id)
        pid = int(info["State"]["Pid"])
        assert Path(f"/proc/{pid}/cgroup").is_file()  # its process is here, to be misread
        seen = view(remote, info)
        assert not seen.seen and seen.cgroup is None and "another machine" in str(seen.unseen)
        runtime = observed_runtime(client.api, container.id, remote)
        assert runtime.gvisor is None and "another machine" in runtime.evidence
        # Through the unix socket the engine is this machine's, and the kernel's records are read.
        here = view(engine(host=os.environ["OPENENV_TEST_DOCKER2_HOST"]), info)
        assert here.seen and here.pid == pid and here.cgroup is not None and pid in here.cgroup.processes()
        # A process of this machine that is not the container's is never taken for it.
        stranger = view(engine(host=os.environ["OPENENV_TEST_DOCKER2_HOST"]), {**info, "State": {"Pid": os.getpid()}})
        assert not stranger.seen and "not the container's" in str(stranger.unseen)
    finally:
        container.remove(force=True)


@pytest.fixture
def built_elsewhere(
    remote: ContainerEngine, clean_factory: sessionmaker[Session], hub_settings: HubSettings
) -> Iterator[HubSettings]:
    """A Hub whose engine is elsewhere, after its pipeline ran echo_env."""
    settings = hub_settings.model_copy(
        update={
            "builder": "container",
            "play_instance_linger_s": 0.0,
            "image_prefix": f"openenv-hub-remote-{uuid.uuid4().hex[:8]}",
            # The stand-in engine's own bridge has no way out (scripts/docker-engine2); its RUN steps reach
            # the package index through the host's network, as an engine elsewhere would through its own.
            "build_network": "host",
        }
    )
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    index_source(clean_factory, LocalSource(root, trusted=True))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            outcomes = pool.submit(Worker(settings, clean_factory).run_until_idle).result()
        with clean_factory() as s:
            logs = {r.stage: r.log for r in s.scalars(select(StageRun))}
        assert outcomes == ["passed"], "\n".join(f"--- {k}\n{v}" for k, v in logs.items())
        yield settings
    finally:
        remove_tagged(remote.client(), settings.image_prefix)


async def test_a_hub_on_an_engine_elsewhere_builds_smoke_tests_and_serves_play(
    built_elsewhere: HubSettings, remote: ContainerEngine, clean_factory: sessionmaker[Session]
) -> None:
    import docker

    with clean_factory() as s:
        version = s.scalar(select(EnvVersion))
        assert version is not None and version.image_ref
        logs = {r.stage: r.log or "" for r in s.scalars(select(StageRun).where(StageRun.version_id == version.id))}
        report = version.rfc008
    # The build went to the engine elsewhere (its CLI was told that engine's host), not this machine's.
    assert remote.client().images.get(version.image_ref).id
    with pytest.raises(docker.errors.ImageNotFound):
        docker.DockerClient(base_url="unix:///var/run/docker.sock").images.get(version.image_ref)
    assert "limit is not enforced here" in logs["build"]
    # The smoke log names what the Hub cannot guarantee there, and the checks that need this
    # machine's kernel skip, saying why: none of them passes on what it could not see.
    not_enforced = [line for line in logs["smoke"].splitlines() if "not enforced:" in line]
    assert len(not_enforced) == len(remote.unenforced()), logs["smoke"]
    assert any("firewall" in line for line in not_enforced)
    assert report is not None
    results = {r["check_id"]: r for r in report["results"]}
    for check in CONTAINER_CHECKS:
        assert results[check]["status"] == "skip", results[check]
    assert any("another machine" in line for line in results["runtime.resource_bounds"]["evidence"])
    assert "not checked from this host" in logs["smoke"]  # the runtime: the engine's word only

    # A visitor plays on the engine elsewhere, at the address the engine publishes on.
    play = PlayManager(built_elsewhere, clean_factory)
    try:
        session = await play.open("tab", "10.0.0.7", "local", "echo_env")
        await session.reset()
        out = await session.step({"message": "from another machine"})
        assert out["observation"]["echoed_message"] == "from another machine"
        playing = remote.client().containers.list(filters={"label": "org.openenv.hub.play=1"})
        assert [c.attrs["Config"]["Image"] for c in playing] == [version.image_ref]
        await play.close("tab")
    finally:
        await play.aclose()
