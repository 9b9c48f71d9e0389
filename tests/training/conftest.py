"""Servers for the training tests: tiny envs in-process, blackjack servers as real processes."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest

from tests.support.servers import ROOT, ProcessServer, serve_app


@pytest.fixture(scope="session")
def scored_url() -> Iterator[str]:
    from tests.training.envs import scored_app

    with serve_app(scored_app) as url:
        yield url


@pytest.fixture(scope="session")
def slow_url() -> Iterator[str]:
    from tests.training.envs import slow_app

    with serve_app(slow_app) as url:
        yield url


@pytest.fixture(scope="session")
def picky_url() -> Iterator[str]:
    from tests.training.envs import picky_app

    with serve_app(picky_app) as url:
        yield url


@pytest.fixture(scope="session")
def blackjack_url() -> Iterator[str]:
    from blackjack_env.server.app import app

    with serve_app(app) as url:
        yield url


def blackjack_process(port: int | None = None) -> ProcessServer:
    """envs/blackjack_env as a Space runs it, in its own process (so a test can kill it).

    `port` reuses a given port (to bring a stopped server back at the same address).
    """
    cmd = [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"]
    if port is not None:
        cmd += ["--host", "127.0.0.1", "--port", str(port)]
    server = ProcessServer(
        cmd,
        cwd=ROOT / "envs" / "blackjack_env",
        env={"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        port_args=port is None,
    )
    if port is not None:
        server.port, server.url = port, f"http://127.0.0.1:{port}"
    return server


@contextlib.contextmanager
def blackjack_processes(count: int) -> Iterator[list[ProcessServer]]:
    """`count` blackjack server processes, started together, stopped on exit."""
    servers = [blackjack_process() for _ in range(count)]
    try:
        for s in servers:
            s.wait()
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.fixture()
def blackjack_servers() -> Iterator[list[ProcessServer]]:
    """Three blackjack server processes, started together."""
    with blackjack_processes(3) as servers:
        yield servers
