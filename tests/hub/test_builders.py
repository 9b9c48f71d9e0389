"""`choose_builder` picks a `Builder` from the Hub's settings and the source's trust: untrusted
code is never built outside a container, and a build's infrastructure trouble carries its reason
code (no text is read to classify it)."""

from __future__ import annotations

import logging

import pytest

from hub_service.catalog.states import BuilderKind
from hub_service.pipeline.builders import ContainerBuilder, ProcessBuilder, choose_builder
from hub_service.pipeline.stages import StageFailed
from hub_service.queue.errors import Transient, WaitCode
from hub_service.settings import HubSettings


def test_untrusted_code_is_built_in_a_container_or_not_at_all(hub_settings: HubSettings) -> None:
    process = hub_settings.model_copy(update={"builder": "process"})
    container = hub_settings.model_copy(update={"builder": "container"})
    auto = hub_settings.model_copy(update={"builder": "auto"})
    assert isinstance(choose_builder(process, trusted=True), ProcessBuilder)
    with pytest.raises(StageFailed, match="not from a trusted source: it is built and run only in containers"):
        choose_builder(process, trusted=False)
    assert choose_builder(container, trusted=True).kind == BuilderKind.CONTAINER
    assert isinstance(choose_builder(auto, trusted=False), ContainerBuilder)  # whether or not an engine answers


def test_the_builder_docker_is_the_builder_container_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENENV_HUB_BUILDER", "docker")  # its name before: deprecated, goes in the next release
    with caplog.at_level(logging.WARNING, logger="hub_service.settings"):
        settings = HubSettings()
    assert settings.builder == BuilderKind.CONTAINER
    assert isinstance(choose_builder(settings, trusted=True), ContainerBuilder)
    assert "OPENENV_HUB_BUILDER=docker is deprecated, use OPENENV_HUB_BUILDER=container" in caplog.text
    caplog.clear()
    monkeypatch.setenv("OPENENV_HUB_BUILDER", "container")
    with caplog.at_level(logging.WARNING, logger="hub_service.settings"):
        assert HubSettings().builder == BuilderKind.CONTAINER
    assert "deprecated" not in caplog.text
    monkeypatch.setenv("OPENENV_HUB_BUILDER", "podman")  # an engine is not a builder: refused, as any other word
    with pytest.raises(ValueError, match="builder"):
        HubSettings()


def test_a_transient_error_carries_a_known_reason_code() -> None:
    assert Transient("the engine went away", code="engine_lost").code is WaitCode.ENGINE_LOST
    assert Transient("something outside failed").code is WaitCode.OTHER
    with pytest.raises(ValueError, match="'engine_sad' is not a valid WaitCode"):
        Transient("made up", code="engine_sad")
