"""A new user's whole journey, with the real tools: init → validate → its own tests → serve →
build (real Docker) → run the image → push to the (stand-in) Hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.cli import Run
from tests.support.hf_hub import HubStandIn
from tests.support.servers import free_port, wait_http
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture()
def docker_base_image() -> str:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # no engine here: say why the test cannot run
        require_system("Docker", f"no Docker engine reachable ({exc}); scripts/test starts one")
    return os.environ.get("OPENENV_TEST_BASE_IMAGE", "python:3.11-slim")


def test_init_validate_test_serve_build_run_push(
    run_cli: Run, hf_hub: HubStandIn, tmp_path: Path, docker_base_image: str
) -> None:
    import docker

    assert run_cli("init", "my_env").returncode == 0
    env_dir = tmp_path / "my_env"

    checked = run_cli("validate", "my_env", "--strict", "--run", "--json", "--steps", "5")
    assert checked.returncode == 0, checked.stdout[-3000:]
    report = json.loads(checked.stdout)
    assert report["levels_run"] == [1, 2, 3]
    assert [r["check_id"] for r in report["results"] if r["status"] not in ("pass", "skip")] == []

    own_tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=env_dir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert own_tests.returncode == 0, own_tests.stdout[-3000:] + own_tests.stderr[-2000:]
    assert "4 passed" in own_tests.stdout

    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "openenv"), "serve", "my_env", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=30, proc=server)
        live = run_cli("validate", "--url", f"http://127.0.0.1:{port}", "--strict", "--steps", "5")
        assert live.returncode == 0, live.stdout
    finally:
        server.terminate()
        server.wait(15)

    client = docker.from_env()
    tag = f"cli-e2e-my-env:{uuid.uuid4().hex[:8]}"
    container = None
    try:
        built = run_cli("build", "my_env", "-t", tag, "--base-image", docker_base_image, "--json", timeout=900)
        assert built.returncode == 0, built.stderr[-3000:]
        result = json.loads(built.stdout)
        assert result["tag"] == tag and result["sdk"].startswith("local:")  # the SDK of this checkout, not PyPI's
        image = client.images.get(tag)
        assert image.labels["org.openenv.name"] == "my_env"
        host_port = free_port()
        container = client.containers.run(
            tag,
            detach=True,
            name=f"cli-e2e-{uuid.uuid4().hex[:8]}",
            ports={"8000/tcp": ("127.0.0.1", host_port)},
            labels={"org.openenv.test": "cli"},
        )
        wait_http(f"http://127.0.0.1:{host_port}/health", timeout=60)
        # the folder's declarations, checked against the server in the image: plans replayed there
        in_docker = run_cli("validate", "my_env", "--url", f"http://127.0.0.1:{host_port}", "--json", "--strict")
        assert in_docker.returncode == 0, in_docker.stdout[-3000:]
        in_image = {r["check_id"]: r["status"] for r in json.loads(in_docker.stdout)["results"]}
        assert in_image["semantic.oracle_max"] == in_image["runtime.episode_determinism"] == "pass"
    finally:
        if container is not None:
            container.remove(force=True)
        client.images.remove(tag, force=True)

    pushed = run_cli("push", "my_env", "--json", env=hf_hub.client_env())
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["repo_id"] == "alice/my_env"
    assert hf_hub.files("alice/my_env")["server/environment.py"] == (env_dir / "server" / "environment.py").read_bytes()
    assert hf_hub.space("alice/my_env").runtime["stage"] == "RUNNING"
