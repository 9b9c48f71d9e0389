"""Building images on a machine that may have no registry: every base image is checked before the
build, a `BASE_IMAGE` default that cannot be pulled falls back to the registry-free local base (and
says so), and what cannot be fixed that way fails with a reason code and what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import openenv.images._base
from openenv.dockerfile import needs_buildkit
from openenv.images import ImageBuildError, base_images, build_image
from tests.providers.conftest import ECHO_DIR, RUN_LABEL

ABSENT = "openenv-test/absent-base:1"  # a name no registry has (and none is reachable here)


def test_base_images_follow_args_stages_and_continuations() -> None:
    text = """# syntax=docker/dockerfile:1
ARG BASE_IMAGE=python:3.11-slim
ARG TOOLS=ghcr.io/acme/tools:2
FROM ${BASE_IMAGE} AS build
RUN pip install \\
    uv
FROM --platform=linux/amd64 $TOOLS AS tools
FROM scratch AS empty
FROM build
COPY --from=tools /bin/t /bin/t
"""
    assert base_images(text) == [("python:3.11-slim", True), ("ghcr.io/acme/tools:2", False)]
    assert base_images(text, {"BASE_IMAGE": "openenv-local/python:3.11"})[0] == ("openenv-local/python:3.11", True)
    assert base_images("FROM python:3.12\n") == [("python:3.12", False)]
    assert base_images("ARG BASE_IMAGE\nFROM ${BASE_IMAGE:-debian:12}\n") == [("debian:12", True)]


def _env_with_base(tmp_path: Path, first_line: str | None = None) -> Path:
    """A copy of echo_env, its Dockerfile's ARG/FROM lines replaced by `first_line` when given."""
    folder = tmp_path / "echo_env"
    shutil.copytree(ECHO_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    if first_line is not None:
        dockerfile = folder / "Dockerfile"
        text = dockerfile.read_text().replace("ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}", first_line)
        assert text != dockerfile.read_text()
        dockerfile.write_text(text)
    return folder


def test_an_unpullable_base_image_default_falls_back_to_the_local_base(
    tmp_path, docker_engine, base_image: str, monkeypatch
) -> None:
    monkeypatch.setattr(openenv.images._base, "LOCAL_BASE_IMAGE", base_image)  # the registry-free base of this machine
    folder = _env_with_base(tmp_path, f"ARG BASE_IMAGE={ABSENT}\nFROM ${{BASE_IMAGE}}")
    lines: list[str] = []
    tag = "providers-test/base-fallback:latest"
    try:
        result = build_image(folder, tag, on_log=lines.append, labels={RUN_LABEL[0]: RUN_LABEL[1]})
        assert result.image_id
        said = [line for line in lines if ABSENT in line]
        assert said and "cannot be pulled" in said[0] and f"{base_image} (" in said[0], said
        assert "serves this build in its place" in said[0], said
    finally:
        docker_engine.images.remove(tag, force=True)


def test_a_base_image_nobody_can_get_fails_with_what_to_do(tmp_path, docker_engine) -> None:
    folder = _env_with_base(tmp_path, f"ARG BASE_IMAGE=python:3.11-slim\nFROM {ABSENT}")
    with pytest.raises(ImageBuildError) as caught:
        build_image(folder, "providers-test/never:latest")
    assert caught.value.reason == ImageBuildError.BASE_IMAGE and caught.value.infrastructure
    assert ABSENT in str(caught.value) and "docker pull / docker load" in str(caught.value)


def test_openenv_build_names_the_option_that_fixes_a_missing_base_image(tmp_path, docker_engine, run_cli) -> None:
    folder = _env_with_base(tmp_path)
    out = run_cli("build", str(folder), "--base-image", ABSENT, "-t", "providers-test/never:latest")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"base image {ABSENT} is not in the Docker engine and cannot be pulled" in out.stderr
    assert "openenv build --base-image IMAGE" in out.stderr


def test_needs_buildkit_spots_what_the_classic_builder_rejects() -> None:
    assert needs_buildkit("FROM python:3.11-slim\nRUN --mount=type=cache,target=/root/.cache/uv uv sync\n")
    assert needs_buildkit("# syntax=docker/dockerfile:1.7\nFROM python:3.11-slim\n")
    assert needs_buildkit("FROM x\nCOPY --link . /app\n")
    assert needs_buildkit("FROM x\nRUN <<EOF\necho hi\nEOF\n")
    assert not needs_buildkit("FROM python:3.11-slim\nRUN pip install -r requirements.txt\nCOPY --chown=1000 . /app\n")


def test_a_named_python_base_nobody_serves_gets_the_local_stand_in(
    tmp_path, docker_engine, base_image: str, monkeypatch
) -> None:
    # The local base is Python 3.11 on Debian bookworm: it stands in for the images it matches (python:3.11-slim,
    # upstream's openenv-base) when a Dockerfile names one itself. Here a name of the test's own stands for those.
    monkeypatch.setattr(openenv.images._base, "LOCAL_BASE_IMAGE", base_image)
    monkeypatch.setattr(openenv.images._base, "STAND_IN_FOR", frozenset({ABSENT}))
    folder = _env_with_base(tmp_path, f"FROM {ABSENT}")
    lines: list[str] = []
    tag = "providers-test/stand-in:latest"
    try:
        build_image(folder, tag, on_log=lines.append, labels={RUN_LABEL[0]: RUN_LABEL[1]})
        said = [line for line in lines if ABSENT in line]
        assert said and "serves this build in its place (for this build only)" in said[0] and base_image in said[0], (
            said
        )
        # Only this build used the stand-in: the engine has no image of the missing name (no engine-wide retag).
        assert not docker_engine.images.list(name=ABSENT)
        base_layers = docker_engine.images.get(base_image).attrs["RootFS"]["Layers"]
        assert docker_engine.images.get(tag).attrs["RootFS"]["Layers"][: len(base_layers)] == base_layers
    finally:
        docker_engine.images.remove(tag, force=True)


def test_whether_the_engine_just_started_is_read_from_its_api_never_from_a_log() -> None:
    """An engine that started an hour ago is not "starting up", whatever a build's log says (a step can
    print the words of its network hook); one that started a moment ago is, whatever the log says."""
    import datetime as dt

    from openenv.images import _engine_starting

    def engine(started: dt.datetime) -> object:
        class Engine:
            class networks:
                @staticmethod
                def get(name: str) -> object:
                    return type("Net", (), {"attrs": {"Created": started.strftime("%Y-%m-%dT%H:%M:%S.0Z")}})()

        return Engine()

    now = dt.datetime.now(dt.UTC)
    assert not _engine_starting(engine(now - dt.timedelta(hours=1)))
    assert _engine_starting(engine(now - dt.timedelta(seconds=5)))
