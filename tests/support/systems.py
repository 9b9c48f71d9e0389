"""Tests that need a system (Docker, PostgreSQL, Chromium) call `require_system` when it is missing.

On a developer's machine that is a skip, with what to run. When `CI` is set it is a failure: CI
installs and starts every system (scripts/test), so a missing one is a broken set-up, never a
reason to pass green. `tests/conftest.py` also fails a CI run that skipped any test at all.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "require_runsc", "require_system", "use_podman", "use_remote_engine"]


def in_ci() -> bool:
    """Whether this run is CI's (the `CI` variable set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_system(system: str, reason: str) -> NoReturn:
    """Stop the test because `system` is missing: a skip, or under CI a failure."""
    message = f"{system} is missing: {reason}"
    if in_ci():
        pytest.fail(
            f"{message} (CI is set: every system must be there; `bash scripts/test` installs and starts them)",
            pytrace=False,
        )
    pytest.skip(message)


def require_runsc() -> None:
    """Stop the test unless the Docker engine has gVisor's runtime `runsc` (scripts/docker-engine registers it)."""
    try:
        import docker

        runtimes = docker.from_env().info().get("Runtimes") or {}
    except Exception as exc:  # no engine, no SDK
        require_system("Docker", f"no engine answers ({exc})")
    if "runsc" not in runtimes:
        require_system(
            "gVisor", f"the engine has no runtime 'runsc' (it has {sorted(runtimes)}): run `bash scripts/docker-engine`"
        )


def use_podman(monkeypatch: pytest.MonkeyPatch) -> str:
    """Point `openenv.engines` at Podman's API service (scripts/podman-engine, which scripts/test
    starts) for this test; returns its CONTAINER_HOST."""
    host = os.environ.get("OPENENV_TEST_PODMAN_HOST", "")
    if not host:
        require_system("Podman", "OPENENV_TEST_PODMAN_HOST is not set: run through `bash scripts/test`")
    try:
        import docker

        docker.DockerClient(base_url=host).ping()
    except Exception as exc:
        require_system("Podman", f"its API service at {host} does not answer ({exc}): run `bash scripts/podman-engine`")
    monkeypatch.setenv("OPENENV_CONTAINER_ENGINE", "podman")
    monkeypatch.setenv("CONTAINER_HOST", host)
    return host


def use_remote_engine(monkeypatch: pytest.MonkeyPatch) -> str:
    """Point `openenv.engines` at a Docker engine reached over TCP, as one on another machine is
    (the tests' second engine on its TCP address, scripts/docker-engine2), with the tests' base
    image loaded there; returns its DOCKER_HOST."""
    host = os.environ.get("OPENENV_TEST_DOCKER2_TCP", "")
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE", "")
    if not host or not base:
        require_system(
            "second Docker engine",
            "OPENENV_TEST_DOCKER2_TCP or OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`",
        )
    try:
        import docker

        there = docker.DockerClient(base_url=host, timeout=300)
        here = docker.from_env(timeout=300)
        wanted = here.images.get(base)
        try:
            found = there.images.get(base).id
        except docker.errors.ImageNotFound:
            found = None
        if found != wanted.id:  # the engine elsewhere has its own images: the base is copied there once
            there.images.load(wanted.save(named=True))
    except Exception as exc:
        require_system(
            "second Docker engine",
            f"{host} does not answer or cannot take {base} ({exc}): run `bash scripts/docker-engine2`",
        )
    monkeypatch.setenv("OPENENV_CONTAINER_ENGINE", "docker")
    monkeypatch.setenv("DOCKER_HOST", host)
    return host
