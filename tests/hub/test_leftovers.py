"""Issue 22 (slice D, item 2): nothing the Hub starts outlives it. A real `openenv hub serve` runs a
Space whose server hangs in its first step (its smoke test hangs); a worker killed mid-smoke leaves no
container once its replacement starts; the service killed outright (SIGKILL) takes its workers
with it within seconds, and its next start removes the container they left; a normal stop leaves
no container behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub_service.sandbox import HUB_LABEL, hub_instance
from hub_service.settings import HubSettings
from tests.support.cli import openenv_command
from tests.support.images import remove_tagged
from tests.support.procs import running
from tests.support.servers import ROOT, free_port, wait_http
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class Hub:
    """One `openenv hub serve` on a data folder, started and stopped as an operator would."""

    def __init__(self, tmp: Path) -> None:
        source = tmp / "envs"
        shutil.copytree(ROOT / "tests" / "hub" / "envs" / "hanging_step", source / "hanging_step")
        self.data = tmp / "data"
        self.database_url = f"sqlite:///{self.data / 'hub.db'}"
        self.prefix = f"openenv-hub-test-leftovers-{os.getpid()}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "OPENENV_HUB_"))}
        self.env.update(
            {
                "HF_HOME": str(tmp / "hf-home"),
                "OPENENV_HUB_DATABASE_URL": self.database_url,
                "OPENENV_HUB_LOCAL_SOURCE": str(source),
                "OPENENV_HUB_BUILDER": "container",
                "OPENENV_HUB_BASE_IMAGE": os.environ["OPENENV_TEST_BASE_IMAGE"],
                "OPENENV_HUB_IMAGE_PREFIX": self.prefix,
                "OPENENV_HUB_STEP_TIMEOUT_S": "600",
                "OPENENV_HUB_HEARTBEAT_S": "1",
                "OPENENV_HUB_JOB_STALE_AFTER_S": "6",
                "OPENENV_HUB_JOB_MAX_ATTEMPTS": "10",
            }
        )
        self.instance = hub_instance(HubSettings(database_url=self.database_url))
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "serve.log"

    def start(self) -> subprocess.Popen[bytes]:
        # free_port() only finds a port free a moment ago: another process (a parallel test worker)
        # may bind it first. uvicorn then exits with 3 saying so, and the service starts on another port.
        for _ in range(3):
            port = free_port()
            logged = self.log.stat().st_size if self.log.exists() else 0
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(
                    [
                        openenv_command(),
                        "hub",
                        "serve",
                        "--port",
                        str(port),
                        "--workers",
                        "1",
                        "--data-dir",
                        str(self.data),
                    ],
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            try:
                wait_http(f"http://127.0.0.1:{port}/api/v1/health", timeout=60, proc=self.proc)
                return self.proc
            except RuntimeError as exc:
                said = self.log.read_bytes()[logged:].decode(errors="replace")
                if "address already in use" not in said.lower():
                    raise RuntimeError(f"{exc}; the service's log:\n{said[-4000:]}") from exc
        raise RuntimeError(f"three ports in a row were taken before the service could bind them; see {self.log}")

    def containers(self) -> list[Any]:
        import docker

        return list(docker.from_env().containers.list(all=True, filters={"label": f"{HUB_LABEL}={self.instance}"}))

    def cleanup(self) -> None:
        import docker

        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        client = docker.from_env()
        for container in self.containers():
            container.remove(force=True)
        remove_tagged(client, self.prefix)


@pytest.fixture()
def hub(tmp_path: Path) -> Iterator[Hub]:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system(
            "Docker",
            "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`, which starts Docker and makes the base image",
        )
    made = Hub(tmp_path)
    try:
        yield made
    finally:
        made.cleanup()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
                found.append(int(entry.name))
    return found


def _until(what: str, check: Callable[[], Any], timeout: float, hub: Hub) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(
        f"{what} within {timeout:g}s; the service's log:\n{hub.log.read_text(errors='replace')[-4000:]}"
    )


def _smoke_container(hub: Hub, not_in: frozenset[str] | set[str] = frozenset()) -> Any:
    running = [c for c in hub.containers() if c.id not in not_in and c.status == "running"]
    return running[0] if running else None


@pytest.mark.timeout(600)
def test_killed_workers_and_a_killed_service_leave_nothing_running(hub: Hub) -> None:
    serve = hub.start()
    first = _until("a smoke container of the hanging Space runs", lambda: _smoke_container(hub), 300, hub)
    owner_pid = int(first.labels["org.openenv.owner"].split(":")[1])
    assert owner_pid in _children(serve.pid)  # a worker of this service started it

    os.kill(owner_pid, signal.SIGKILL)  # a worker dies mid-smoke (OOM killer, say)
    _until("the dead worker's container is removed", lambda: first.id not in {c.id for c in hub.containers()}, 30, hub)

    # The job is taken up again (its heartbeat went stale) by the replacement worker.
    second = _until(
        "the replacement worker smoke-tests the Space again", lambda: _smoke_container(hub, {first.id}), 120, hub
    )
    workers = _children(serve.pid)
    assert workers
    serve.kill()  # the service is killed outright: no handler, no `finally`
    serve.wait(10)
    _until("the killed service's workers are gone", lambda: not any(running(pid) for pid in workers), 5, hub)
    assert second.id in {c.id for c in hub.containers()}  # SIGKILL leaves no chance to tidy up ...

    restarted = hub.start()  # ... so the next start removes it
    _until(
        "the restarted service removes what the killed one left",
        lambda: second.id not in {c.id for c in hub.containers()},
        30,
        hub,
    )

    _until(
        "the restarted service smoke-tests the Space", lambda: _smoke_container(hub, {first.id, second.id}), 120, hub
    )
    workers = _children(restarted.pid)
    restarted.send_signal(signal.SIGTERM)  # a normal stop, mid-smoke
    assert restarted.wait(60) is not None
    assert not any(running(pid) for pid in workers)
    assert hub.containers() == []
