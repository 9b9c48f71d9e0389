"""The package as a user gets it without PyPI: the sdist holds everything its wheel needs, and that
wheel, installed on its own in a fresh virtual environment, runs the Hub (`openenv hub serve`,
with its migrations and website) and `openenv init` (with its template), away from this checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import tarfile
from pathlib import Path

import httpx
import pytest

from tests.support.servers import ROOT, free_port, wait_http

pytestmark = pytest.mark.slow

UV = ROOT / ".venv" / "bin" / "uv"


def _uv(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # From uv's cache, which scripts/bootstrap filled with exactly these dependencies: no index.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))},
        "UV_OFFLINE": "1",
    }
    out = subprocess.run([str(UV), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"uv {' '.join(args)}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out


def test_the_sdist_builds_a_wheel_that_serves_the_hub(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _uv("build", "--sdist", "--out-dir", str(dist), str(ROOT), cwd=tmp_path)
    [sdist] = dist.glob("openenv_hub-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tops = {Path(name).parts[1] for name in tar.getnames() if len(Path(name).parts) > 1}
    assert {"openenv", "hub_service", "pyproject.toml", "README.md"} <= tops
    assert not tops & {"tests", "envs", ".cache", ".venv"}, tops
    _uv("build", "--wheel", "--out-dir", str(dist), str(sdist), cwd=tmp_path)  # the wheel from the sdist alone
    [wheel] = dist.glob("openenv_hub-*.whl")

    venv = tmp_path / "venv"
    _uv("venv", "--python", "python3.11", str(venv), cwd=tmp_path)
    _uv("pip", "install", "--python", str(venv / "bin" / "python"), f"{wheel}[service,cli]", cwd=tmp_path)
    openenv = venv / "bin" / "openenv"
    elsewhere = tmp_path / "elsewhere"  # nothing of this checkout is importable from here
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENENV_", "PYTHONPATH", "VIRTUAL_ENV"))}

    init = subprocess.run(
        [str(openenv), "init", "demo_env"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )
    assert init.returncode == 0, init.stderr
    assert (elsewhere / "demo_env" / "openenv.yaml").is_file() and (elsewhere / "demo_env" / "Dockerfile").is_file()

    port = free_port()
    log = open(tmp_path / "hub.log", "wb")  # noqa: SIM115 - closed below
    hub = subprocess.Popen(
        [str(openenv), "hub", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data"), "--workers", "0"],
        cwd=elsewhere,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/api/v1/health", timeout=120, proc=hub)
        page = httpx.get(f"http://127.0.0.1:{port}/api/v1/envs", timeout=10)
        assert page.status_code == 200 and page.json()["total"] == 0  # migrated, empty (no envs/ beside a wheel)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        imported = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import hub_service, openenv; print(hub_service.__file__, openenv.__file__)",
            ],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert str(venv) in imported.stdout and str(ROOT) not in imported.stdout, imported.stdout
    finally:
        os.killpg(hub.pid, signal.SIGTERM)
        try:
            hub.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
        log.close()
