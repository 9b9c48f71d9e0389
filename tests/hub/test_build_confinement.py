"""Issue 22 (slice D, item 3): a hostile Dockerfile's RUN steps are confined with the Hub's build
options (`sandbox.build_options`) through the real BuildKit builder: they reach no service on the
host's bridge gateway, their processes are bounded, and a build writing past the image cap is
stopped while it runs. Issue 47 (item 8): the classic builder's steps are bounded too, and a step
that reaches either cap is named in the build's log."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub_service.pipeline.builders import ContainerBuilder
from hub_service.pipeline.stage_kit import StageFailed
from hub_service.sandbox import build_options
from hub_service.settings import HubSettings
from openenv.images import ImageBuildError, build_image, buildkit_command
from tests.support.dockerd import engine_past_its_start_up
from tests.support.images import remove_tagged
from tests.support.systems import require_system

# Alone (scripts/test's serial run): a build's process and memory caps are set on BuildKit's one
# cgroup, which every build on the engine shares; a parallel worker's build would reset them.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.serial]

PIDS_MAX = Path("/sys/fs/cgroup/pids/docker/buildkit/pids.max")
SETTINGS = HubSettings(image_max_mb=200, build_pids=200, build_egress=False)  # an operator who allows no egress


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    if buildkit_command() is None:
        require_system("BuildKit", "no docker CLI with BuildKit (Debian's docker.io 20.10 or the buildx plugin)")
    import docker

    engine_past_its_start_up()  # the caps' failures below are the builds' own, on an engine up a while
    client = docker.from_env()
    before = PIDS_MAX.read_text() if PIDS_MAX.is_file() else None
    yield client
    if before is not None:
        PIDS_MAX.write_text(before)  # other builds of this engine get their limit back
    remove_tagged(client, f"openenv-hub-test-confine-{os.getpid()}")


def _context(tmp_path: Path, name: str, run: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    nonce = uuid.uuid4().hex  # never a cached step: every run of the test runs the hostile step
    (folder / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nRUN {run} && : {nonce}\n")
    return folder


def _build(
    tmp_path: Path,
    client: Any,
    name: str,
    run: str,
    settings: HubSettings = SETTINGS,
    builder: str = "buildkit",
) -> tuple[Any, float]:
    folder = _context(tmp_path, name, run)
    start = time.monotonic()
    try:
        result: Any = build_image(
            folder,
            f"openenv-hub-test-confine-{os.getpid()}/{name}:x",
            base_image=os.environ["OPENENV_TEST_BASE_IMAGE"],
            client=client,
            timeout_s=240,
            builder=builder,
            sdk="published",
            **build_options(settings),
        )
    except ImageBuildError as exc:
        result = exc
    return result, time.monotonic() - start


def _bridge_gateway(client: Any) -> str:
    """The host's address on the engine's default bridge. The network's IPAM config names it only
    sometimes (an engine that found its bridge already made at start lists the subnet alone): then
    it is read off the bridge's interface."""
    bridge = client.networks.get("bridge").attrs
    config = (bridge.get("IPAM") or {}).get("Config") or [{}]
    if config[0].get("Gateway"):
        return str(config[0]["Gateway"])
    name = (bridge.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True, text=True, check=True)
    match = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", shown.stdout)
    assert match, f"the engine's bridge {name} has no IPv4 address: {shown.stdout!r}"
    return match.group(1)


@pytest.mark.parametrize("egress", [False, True], ids=["no-egress", "egress"])
def test_a_run_step_cannot_reach_a_service_on_the_bridge_gateway(
    docker_client: Any, tmp_path: Path, egress: bool
) -> None:
    """Without egress the step has no network at all; with it (the default) it still cannot open a
    connection to the host's own services."""
    gateway = _bridge_gateway(docker_client)
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host secrets")

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer((gateway, 0), Handler)  # a host service the engine's bridge can reach
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        run = f"python -c \"import urllib.request; print(urllib.request.urlopen('http://{gateway}:{port}/steal', timeout=5).read())\""
        settings = SETTINGS.model_copy(update={"build_egress": egress})
        result, _ = _build(tmp_path, docker_client, "net", run, settings)
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []
    assert isinstance(result, ImageBuildError) and not result.infrastructure  # the env's step failed, not the machine


def test_a_fork_bomb_in_a_run_step_is_bounded(docker_client: Any, tmp_path: Path) -> None:
    code = (
        "import os,sys,time\\nn=0\\ntry:\\n while n<1500:\\n  if os.fork()==0:\\n   time.sleep(20);os._exit(0)\\n  n+=1\\n"
        "except OSError:\\n pass\\nprint(chr(70)+chr(61),n)\\nsys.exit(3 if n>=1500 else 0)"
    )
    bomb = f"python -c \"exec('{code}')\""
    result, _ = _build(tmp_path, docker_client, "bomb", bomb)
    assert not isinstance(result, ImageBuildError), result.log[-2000:] if isinstance(result, ImageBuildError) else ""
    forked = [int(m.group(1)) for line in result.log if (m := re.search(r"F= (\d+)$", line))]
    assert forked and forked[-1] < 200, result.log[-20:]
    assert any("limited to 200 processes" in line for line in result.log)
    assert any("a RUN step hit the build's process cap of 200" in line for line in result.log), result.log[-20:]


# Forks until the kernel refuses (at most 400 processes, each gone after 5 s), and fails when refused.
FORKS = (
    "import os,sys,time\\nn=0\\ntry:\\n while n<400:\\n  if os.fork()==0:\\n   time.sleep(5);os._exit(0)\\n  n+=1\\n"
    "except OSError:\\n sys.exit(3)\\nprint(n)"
)


def test_a_classic_build_step_at_the_process_cap_is_refused_and_named(docker_client: Any, tmp_path: Path) -> None:
    """The classic builder's steps run under a cgroup of the build's own, capped at BUILD_PIDS; the
    refusal is the build's failure, named in its log."""
    result, _ = _build(tmp_path, docker_client, "classic-forks", f"python -c \"exec('{FORKS}')\"", builder="classic")
    assert isinstance(result, ImageBuildError), f"the step forked 400 processes: {result.log[-5:]}"
    assert result.reason == ImageBuildError.PROCESS_CAP and not result.infrastructure, result
    assert "a RUN step hit the build's process cap of 200" in str(result)
    assert "a RUN step hit the build's process cap of 200" in result.log
    assert not [p for p in Path("/sys/fs/cgroup/pids").glob("openenv-build-*")]  # its cgroup is gone again


def test_the_hub_names_the_process_cap_a_build_step_hit(docker_client: Any, tmp_path: Path) -> None:
    """Through the Hub's builder (BuildKit here): the verdict and the build's log name the cap and
    the setting that sets it."""
    folder = _context(tmp_path, "hub-forks", f"python -c \"exec('{FORKS}')\"")
    settings = SETTINGS.model_copy(
        update={
            "base_image": os.environ["OPENENV_TEST_BASE_IMAGE"],
            "image_prefix": f"openenv-hub-test-confine-{os.getpid()}",
        }
    )
    lines: list[str] = []
    with pytest.raises(StageFailed) as failed:
        ContainerBuilder().build(settings, folder, "local", "forks", uuid.uuid4().hex, lines.append)
    assert "a RUN step hit the build's process cap of 200" in failed.value.reason, failed.value.reason
    assert "OPENENV_HUB_BUILD_PIDS" in failed.value.reason
    assert any("a RUN step hit the build's process cap of 200" in line for line in lines), lines[-10:]


def _aged_step_cgroup(name: str) -> Path:
    """A step cgroup under BuildKit's, made a minute ago (as an engine stopped mid-step leaves one)."""
    folder = PIDS_MAX.parent / name
    folder.mkdir(parents=True)
    past = time.time() - 60
    os.utime(folder, (past, past))
    return folder


def test_a_step_cgroup_a_stopped_engine_left_does_not_hide_the_cap(docker_client: Any, tmp_path: Path) -> None:
    """An engine killed mid-step leaves the step's cgroup behind; BuildKit's cgroup cannot then be
    made anew, and its high-water mark stays at the cap an earlier build reached. The next build
    clears the dead step's cgroup, and a step that hits the cap is still named."""
    _build(tmp_path, docker_client, "before", f"python -c \"exec('{FORKS}')\"")  # the mark is at the cap now
    dead = _aged_step_cgroup(f"openenv-test-dead-{uuid.uuid4().hex[:8]}")
    result, _ = _build(tmp_path, docker_client, "after", f"python -c \"exec('{FORKS}')\"")
    assert not dead.exists(), "the dead step's cgroup was left, so the high-water mark could not start anew"
    assert isinstance(result, ImageBuildError) and result.reason == ImageBuildError.PROCESS_CAP, result
    assert "a RUN step hit the build's process cap of 200" in result.log


def test_a_step_cgroup_that_holds_a_process_is_left_alone(docker_client: Any) -> None:
    """Only a step cgroup with no process is cleared: one holding a process (however old) is a live
    step's, and stays with its process."""
    from openenv.images._cgroup import _hold, _release

    live = _aged_step_cgroup(f"openenv-test-live-{uuid.uuid4().hex[:8]}")
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        (live / "cgroup.procs").write_text(str(sleeper.pid))
        held = _hold(renew_pids=True)
        assert held is not None
        _release(held)
        assert live.is_dir() and (live / "cgroup.procs").read_text().split() == [str(sleeper.pid)]
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        for _ in range(50):  # the kernel lets the cgroup go once the process has been reaped
            try:
                live.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.mark.parametrize("builder", ["buildkit", "classic"])
def test_a_run_step_writing_past_the_cap_is_stopped_while_it_runs(
    docker_client: Any, tmp_path: Path, builder: str
) -> None:
    result, took = _build(
        tmp_path, docker_client, "disk", "head -c 4000M /dev/zero > /big && sleep 120", builder=builder
    )
    assert isinstance(result, ImageBuildError) and result.reason == ImageBuildError.TOO_BIG, result
    assert "cap of 200 MB" in str(result)
    assert "the layer grew past the build's disk cap of 200 MB" in result.log  # named in the build's log
    assert took < 100  # stopped, not left to write 4 GB and sleep
    assert not docker_client.images.list(name=f"openenv-hub-test-confine-{os.getpid()}/disk")
