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
