"""Shared fixtures: real servers on 127.0.0.1 and the upstream openenv-core venv."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.envs.images import EnvImages, docker_client
from tests.support.cli import run_cli  # noqa: F401  (fixture)
from tests.support.hf_hub.fixtures import hf1_python, hf_hub  # noqa: F401  (fixtures)
from tests.support.servers import ROOT, ProcessServer, serve_app
from tests.support.systems import require_system

# browser fixtures and screenshots of failed browser tests; the skip rule (under CI any skip fails the run)
pytest_plugins = [
    "tests.support.browser",
    "tests.support.skip_rule",
    "tests.support.parallel",
    "tests.support.caches",  # the client's caches under the run's temp folder, not ~/.cache/openenv
]

sys.path.insert(0, str(ROOT / "envs"))  # the reference envs import as packages: `echo_env`


@pytest.fixture(scope="session", autouse=True)
def _every_provider_stopped() -> Iterator[None]:
    """At the end of each test process (the whole run, or one parallel worker's share of it): every
    provider a test started was stopped (test_zz_nothing_left.py checks the machine afterwards)."""
    yield
    from openenv.client.providers import lifecycle

    left = lifecycle.active_providers()
    assert left == [], f"providers started in this test process and never stopped: {left}"


@pytest.fixture(scope="session")
def upstream_python() -> str:
    """Python of the separate venv with upstream openenv-core 0.3.0 (made by scripts/upstream-venv)."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "upstream-venv")], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"could not make the upstream venv:\n{out.stderr}")
    return out.stdout.strip()


@pytest.fixture(scope="session")
def upstream010_python() -> str:
    """Python of the separate venv with upstream openenv 0.10.0 (made by `scripts/upstream-venv 0.10.0`)."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "upstream-venv"), "0.10.0"], capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        pytest.fail(f"could not make the upstream 0.10.0 venv:\n{out.stderr}")
    return out.stdout.strip()


@pytest.fixture(scope="session")
def echo_app():
    from echo_env.server.app import app

    return app


@pytest.fixture(scope="session")
def echo_url(echo_app) -> Iterator[str]:
    """envs/echo_env served in-process on 127.0.0.1."""
    with serve_app(echo_app) as url:
        yield url


@pytest.fixture()
def echo_process() -> Iterator[ProcessServer]:
    """envs/echo_env run the way a Space runs it: `python -m openenv.server server.app:app`."""
    server = ProcessServer(
        [sys.executable, "-m", "openenv.server", "server.app:app"],
        cwd=ROOT / "envs" / "echo_env",
        env={"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    try:
        server.wait()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def env_images() -> Iterator[EnvImages]:
    """The bundled env images (tests/envs/images.py: all built at once, on first use, from this
    checkout with the local SDK on OPENENV_TEST_BASE_IMAGE); shared by every folder of tests."""
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        require_system(
            "Docker",
            "OPENENV_TEST_BASE_IMAGE is not set: run `bash scripts/test`, which starts Docker and makes the base image",
        )
    client = docker_client()
    images = EnvImages(client, base)
    try:
        yield images
    finally:
        images.remove_all()
