"""The stand-in runs its OpenEnv Spaces after each push, as the Hub runs Docker Spaces, and its
command line serves it on a fixed port (what the tutorial starts)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi

from openenv import GenericEnvClient
from tests.support.hf_hub import HubStandIn
from tests.support.hf_hub.runner import SpaceRunner
from tests.support.servers import ROOT, free_port, wait_http

pytestmark = pytest.mark.slow
ECHO = ROOT / "envs" / "echo_env"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")  # the Space's venv comes from uv's cache
    monkeypatch.setenv("OPENENV_STATE_DIR", str(tmp_path / "state"))


def _wait_stage(
    api: HfApi, repo_id: str, stages: set[str], timeout: float = 120, other_than: str | None = None
) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = api.space_info(repo_id)
        if info.runtime and info.runtime.stage in stages and info.host != other_than:
            return {"stage": info.runtime.stage, "host": info.host, "raw": info.runtime.raw}
        time.sleep(0.1)
    raise TimeoutError(f"{repo_id} did not reach {stages}")


def test_a_pushed_space_runs_and_a_new_commit_restarts_it(hf_hub: HubStandIn, tmp_path: Path) -> None:
    runner = SpaceRunner(hf_hub, tmp_path / "spaces")
    runner.start()
    try:
        api = HfApi(endpoint=hf_hub.url, token=hf_hub.token)
        api.create_repo("alice/echo_env", repo_type="space", space_sdk="docker")
        api.upload_folder(
            folder_path=str(ECHO), repo_id="alice/echo_env", repo_type="space", ignore_patterns=["__pycache__/*"]
        )
        first = _wait_stage(api, "alice/echo_env", {"RUNNING", "RUNTIME_ERROR"})
        assert first["stage"] == "RUNNING", first
        assert (
            first["host"].startswith("http://127.0.0.1:") and first["raw"]["domains"][0]["domain"] == first["host"][7:]
        )
        with GenericEnvClient(first["host"]).sync() as env:
            env.reset()
            assert env.step({"message": "hey"}).observation["echoed_message"] == "hey"

        api.upload_file(
            path_or_fileobj=b"# changed\n",
            path_in_repo="server/requirements.txt",
            repo_id="alice/echo_env",
            repo_type="space",
        )
        second = _wait_stage(api, "alice/echo_env", {"RUNNING"}, other_than=first["host"])
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{first['host']}/health", timeout=2)  # the old revision's server is gone
        assert httpx.get(f"{second['host']}/health").status_code == 200

        api.upload_file(
            path_or_fileobj=b"raise SystemExit(3)\n",
            path_in_repo="server/app.py",
            repo_id="alice/echo_env",
            repo_type="space",
        )
        broken = _wait_stage(api, "alice/echo_env", {"RUNTIME_ERROR"})
        assert broken["raw"]["errorMessage"]
    finally:
        runner.stop()
    assert not runner.running


def test_the_command_line_serves_on_its_port_with_the_given_token(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.hf_hub",
            "--port",
            str(port),
            "--token",
            "hf_test_token",
            "--data",
            str(tmp_path / "hub"),
            "--no-run",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/api/spaces", proc=proc)
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[1].strip() == f"export HF_ENDPOINT=http://127.0.0.1:{port} HF_TOKEN=hf_test_token"
        assert HfApi(endpoint=f"http://127.0.0.1:{port}", token="hf_test_token").whoami()["name"] == "alice"
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
