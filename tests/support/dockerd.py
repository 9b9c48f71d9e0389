"""Restarting the local Docker engine (the one ../shared/ci/docker-up.sh starts), for fault tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["restart_dockerd"]


def _engine_up() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0


def restart_dockerd(timeout_s: float = 60.0) -> None:
    """Stop dockerd (SIGTERM, as a service manager would) and start it again the same way."""
    pid_file = Path(os.environ.get("TMPDIR", "/tmp")) / "openenv-docker" / "dockerd.pid"
    pids = [int(p) for p in subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout.split()]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    log = open(pid_file.parent / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon
    proc = subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    pid_file.write_text(str(proc.pid))
    while not _engine_up():
        if time.monotonic() > deadline:
            raise RuntimeError("dockerd did not come back")
        time.sleep(0.5)
