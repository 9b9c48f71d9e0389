"""The README's main command on this machine: the Hub comes up on 127.0.0.1, indexes the bundled
envs, builds and smoke-tests each with Docker, and lists every one as passing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.servers import ROOT, free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def bundled_envs() -> set[str]:
    return {p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file()}


def test_scripts_serve_brings_up_the_hub_with_every_bundled_env_passing(tmp_path: Path) -> None:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        pytest.skip("no local base image: run through `bash scripts/test`, which starts Docker and builds one")
    port = free_port()
    env = {**os.environ, "OPENENV_HUB_DATA_DIR": str(tmp_path / "hub"), "OPENENV_HUB_BASE_IMAGE": os.environ["OPENENV_TEST_BASE_IMAGE"]}
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["bash", "scripts/serve", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wanted = bundled_envs()
    items: dict[str, dict] = {}
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                page = httpx.get(f"{url}/api/v1/envs", params={"limit": 100}, timeout=5).json()
            except httpx.HTTPError:
                time.sleep(1)
                continue
            items = {i["name"]: i for i in page["items"]}
            if set(items) >= wanted and all(items[n]["status"] != "pending" for n in wanted):
                break
            time.sleep(2)
        failing = {n: items.get(n, {}).get("status") for n in wanted if items.get(n, {}).get("status") != "passing"}
        details = {n: httpx.get(f"{url}/api/v1/envs/local/{n}/versions/latest").json().get("failure_reason") for n in failing}
        assert not failing, details
        for name in wanted:
            assert items[name]["cold_start_s"] > 0 and items[name]["step_p50_ms"] > 0
            resolved = httpx.get(f"{url}/api/v1/envs/local/{name}/resolve").json()
            assert resolved["image"].startswith("openenv-hub/local-") and resolved["status"] == "passing"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    time.sleep(1)
    with pytest.raises(ProcessLookupError):  # the server and its workers are all gone
        os.killpg(proc.pid, 0)
