"""Restarting the local Docker engine (the one scripts/docker-engine starts), for fault tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.procs import running

__all__ = ["engine_past_its_start_up", "restart_dockerd"]


def _engine_up() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


_started: list[subprocess.Popen[bytes]] = []  # engines this process started: reaped when they exit


def _machine_engines() -> list[int]:
    """The machine's own dockerd processes: not a private engine with an exec root of its own
    (scripts/docker-engine2's, which stands in for another machine and must outlive this restart)."""
    pids = [int(p) for p in subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout.split()]
    mine = []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # it exited meanwhile
            continue
        if b"--exec-root" not in argv:
            mine.append(pid)
    return mine


def restart_dockerd(timeout_s: float = 60.0) -> None:
    """Stop dockerd (SIGTERM, as a service manager would) and start it again the same way.

    Raises:
        RuntimeError: the engine did not stop, or did not come back, within `timeout_s` each.
    """
    pid_file = (
        Path(os.environ.get("OPENENV_DOCKER_STATE") or Path(os.environ.get("TMPDIR", "/tmp")) / "openenv-docker")
        / "dockerd.pid"
    )
    pids = _machine_engines()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it exited between pgrep and now: gone is what we want
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while True:
        for proc in _started:
            proc.poll()  # reaps an engine this process started, so that it does not linger as a zombie
        if not any(running(pid) for pid in pids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"dockerd (pids {pids}) did not stop within {timeout_s:.0f} s")
        time.sleep(0.2)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log = open(pid_file.parent / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon
    proc = subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    _started.append(proc)
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while not _engine_up():
        if proc.poll() is not None:
            raise RuntimeError(f"dockerd exited with {proc.returncode} on start; see {pid_file.parent / 'dockerd.log'}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"dockerd did not come back within {timeout_s:.0f} s; see {pid_file.parent / 'dockerd.log'}"
            )
        time.sleep(0.5)


def engine_past_its_start_up() -> None:
    """Wait until the engine has been up longer than the pipeline's warm-up (openenv.images): right
    after an engine (re)start any build failure waits and is retried as the engine's (its start time
    is the signal), and a test about an env's own failure needs an engine that has been up a while."""
    import docker

    from openenv.images import _ENGINE_WARMUP_S, _engine_starting, engine_epoch

    client = docker.from_env()
    deadline = time.monotonic() + _ENGINE_WARMUP_S + 15
    while _engine_starting(client) and time.monotonic() < deadline:
        time.sleep(1)
    assert engine_epoch(client) is not None and not _engine_starting(client)
