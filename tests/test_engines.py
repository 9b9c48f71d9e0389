"""The container-engine port: one setting picks the engine, and a wrong or absent one says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.engines import ENGINES, DockerEngine, PodmanEngine, engine
from openenv.errors import ProviderUnavailableError


def test_the_setting_picks_the_engine_and_each_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_CONTAINER_ENGINE", raising=False)
    assert isinstance(engine(), DockerEngine) and engine() is engine()
    monkeypatch.setenv("OPENENV_CONTAINER_ENGINE", "Podman")
    assert isinstance(engine(), PodmanEngine) and engine() is engine("podman")
    assert set(ENGINES) == {"docker", "podman"}


def test_an_unknown_engine_is_refused_with_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_CONTAINER_ENGINE", "containerd")
    with pytest.raises(ProviderUnavailableError, match="names no engine this openenv knows: use one of docker, podman"):
        engine()


def test_an_engine_that_does_not_answer_says_how_to_start_it(tmp_path: Path) -> None:
    absent = f"unix://{tmp_path / 'nothing.sock'}"
    with pytest.raises(ProviderUnavailableError, match=r"no Podman engine reachable .*bash scripts/podman-engine"):
        PodmanEngine(absent).client()
    with pytest.raises(ProviderUnavailableError, match=r"no Docker engine reachable .*bash scripts/docker-engine"):
        DockerEngine(absent).client()


@pytest.mark.parametrize(
    ("host", "local", "address"),
    [
        (None, True, "127.0.0.1"),
        ("unix:///var/run/docker.sock", True, "127.0.0.1"),
        ("tcp://127.0.0.1:2375", False, "127.0.0.1"),  # TCP is another machine's, even on loopback
        ("tcp://[::1]:2375", False, "::1"),
        ("ssh://builder@127.0.0.1", False, "127.0.0.1"),
    ],
)
def test_the_port_says_where_an_engine_runs_from_how_it_is_reached(host: str | None, local: bool, address: str) -> None:
    eng = DockerEngine(host)
    assert (eng.local, eng.address) == (local, address)
    assert bool(eng.unenforced()) is not local
    env = eng.cli_env({"PATH": "/usr/bin"})
    assert env.get("DOCKER_HOST") == eng.host and env["PATH"] == "/usr/bin"


def test_an_engine_elsewhere_that_needs_this_hosts_firewall_is_refused_isolation() -> None:
    DockerEngine("tcp://127.0.0.1:2375").check_isolation()  # its network has no route out on its own
    PodmanEngine("unix:///run/podman/podman.sock").check_isolation()  # the firewall goes on this host
    with pytest.raises(ProviderUnavailableError, match=r"runs on another machine.*run a Hub worker on that host"):
        PodmanEngine("tcp://127.0.0.1:8888").check_isolation()


def test_a_client_is_traced_to_its_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    from openenv.engines import engine_of

    monkeypatch.delenv("OPENENV_CONTAINER_ENGINE", raising=False)
    remote = engine_of(docker.DockerClient(base_url="tcp://127.0.0.1:2375", version="1.41"))
    assert remote.host == "tcp://127.0.0.1:2375" and not remote.local
    there = engine_of(docker.DockerClient(base_url="unix:///tmp/elsewhere.sock", version="1.41"))
    assert there.host == "unix:///tmp/elsewhere.sock" and there.local
