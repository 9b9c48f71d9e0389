"""Fixtures for the provider tests: a labelled test run, the echo image, a single-node swarm.

Everything the suite starts through providers carries `org.openenv.test-run=<id>` (through
OPENENV_LABELS, which child processes inherit too), so the last test of the session can check
that nothing with that label is still running (test_zz_nothing_left.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import ROOT
from tests.support.systems import require_system

# This test process's label: its tests check what *they* left by it, whatever other workers run.
RUN_ID = uuid.uuid4().hex[:12]
RUN_LABEL = ("org.openenv.test-run", RUN_ID)
# scripts/test gives every pytest process of one run (the parallel workers, then the serial run that
# holds test_zz_nothing_left.py) one more label, and one state folder, so that the last check sees them all.
RUN_SET_LABEL = ("org.openenv.test-run-set", os.environ.get("OPENENV_TEST_RUN_ID") or RUN_ID)
ECHO_DIR = ROOT / "envs" / "echo_env"
_SHARED_STATE = os.environ.get("OPENENV_TEST_STATE_DIR")
STATE_DIR = Path(_SHARED_STATE) if _SHARED_STATE else Path(tempfile.mkdtemp(prefix="openenv-providers-state-"))
STATE_DIR.mkdir(parents=True, exist_ok=True)

# Set before any provider runs; the subprocesses that tests start inherit them.
os.environ["OPENENV_LABELS"] = f"{RUN_LABEL[0]}={RUN_LABEL[1]},{RUN_SET_LABEL[0]}={RUN_SET_LABEL[1]}"
os.environ["OPENENV_NAME_PREFIX"] = "providers-test"
os.environ["OPENENV_STATE_DIR"] = str(STATE_DIR)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # The leftover check must be the very last test of the whole run, after every other directory.
    last = [i for i in items if i.nodeid.startswith("tests/providers/test_zz_nothing_left.py")]
    items[:] = [i for i in items if i not in last] + last


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _SHARED_STATE:  # a shared folder outlives this process: scripts/test removes it at the end
        shutil.rmtree(STATE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_index(monkeypatch: pytest.MonkeyPatch) -> None:
    # Env venvs are made from uv's cache (filled by scripts/bootstrap): tests reach no index.
    monkeypatch.setenv("UV_OFFLINE", "1")


def _docker_engine() -> str | None:
    """Why Docker tests cannot run here, or None when they can."""
    try:
        from openenv.client.providers._docker import docker_client

        docker_client()
    except Exception as exc:  # no SDK, no engine: the reason is printed with the skip
        return f"no Docker engine ({exc}); scripts/test starts one"
    return None


@pytest.fixture(scope="session")
def docker_engine() -> object:
    reason = _docker_engine()
    if reason:
        require_system("Docker", reason)
    from openenv.client.providers._docker import docker_client

    return docker_client()


@pytest.fixture(scope="session")
def base_image(docker_engine: object) -> str:
    """The base image scripts/test chose for this machine (scripts/base-image)."""
    image = os.environ.get("OPENENV_TEST_BASE_IMAGE") or "openenv-local/python:3.11"
    try:
        docker_engine.images.get(image)  # type: ignore[attr-defined]
    except Exception:
        require_system("the base image", f"{image} is not in the engine; run the tests with scripts/test (it makes it)")
    return image


@pytest.fixture(scope="session")
def echo_image(base_image: str) -> str:
    """envs/echo_env built once per session with the local SDK (openenv.images.build_image)."""
    from openenv.images import build_image

    tag = "providers-test/echo_env:latest"
    build_image(ECHO_DIR, tag, base_image=base_image, labels={RUN_LABEL[0]: RUN_LABEL[1]})
    return tag


SWARM_LABEL = "org.openenv.test-swarm"  # on the node of a swarm a test run made


def leave_a_killed_runs_swarm(client: Any) -> None:
    """Leave a swarm that a test run killed outright left behind (its node carries SWARM_LABEL):
    it is nobody's, and the engine must not stay a swarm manager for the next run's tests."""
    from openenv.client.providers.swarm import leave_swarm, swarm_active

    if not swarm_active(client):
        return
    node = client.nodes.get(client.info()["Swarm"]["NodeID"])
    if SWARM_LABEL in (node.attrs["Spec"].get("Labels") or {}):
        leave_swarm(client)


@pytest.fixture(scope="session")
def swarm(docker_engine: Any) -> Iterator[object]:
    """A single-node swarm on 127.0.0.1: made here when the engine is not in one (its node
    labelled as a test run's), left at the end."""
    from openenv.client.providers.swarm import ensure_swarm, leave_swarm

    leave_a_killed_runs_swarm(docker_engine)
    made = ensure_swarm(docker_engine)
    if made:
        node = docker_engine.nodes.get(docker_engine.info()["Swarm"]["NodeID"])
        spec = node.attrs["Spec"]
        node.update({**spec, "Labels": {**(spec.get("Labels") or {}), SWARM_LABEL: "1"}})
    try:
        yield docker_engine
    finally:
        if made:
            leave_swarm(docker_engine)


@pytest.fixture()
def crashy_env(tmp_path: Path) -> Path:
    """A copy of echo_env whose server process exits on a step with message "die"."""
    folder = tmp_path / "crashy_env"
    shutil.copytree(ECHO_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    env_file = folder / "server" / "echo_environment.py"
    text = env_file.read_text()
    marker = "        length = len(action.message)\n"
    assert marker in text
    env_file.write_text(
        text.replace(
            marker, "        if action.message == 'die':\n            import os\n            os._exit(3)\n" + marker, 1
        )
    )
    return folder


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter of this venv (inherits the test run's labels)."""
    return subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
