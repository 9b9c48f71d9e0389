"""Issue 31, item 4: a Hub leaves the host as it found it. A Hub process that builds with egress
(its RUN steps kept off the host's services by a firewall rule) and a memory and process cap, and
readies the smoke network, changes the firewall and BuildKit's cgroup only while it runs: once it
stops, `iptables -S` and the cgroup files are what they were. One killed outright mid-build leaves
its changes, and `openenv hub gc` undoes them.

Serial: it compares the whole host's firewall, which Hub processes of parallel tests change while
they run (each in its own chain, gone when they stop)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.images import buildkit_command
from tests.support.servers import ROOT
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.serial]

# Every file the build's limits may write (cgroup v1 memory and pids, then the unified hierarchy).
CGROUP_FILES = [
    Path("/sys/fs/cgroup/memory/docker/buildkit/memory.limit_in_bytes"),
    Path("/sys/fs/cgroup/memory/docker/buildkit/memory.memsw.limit_in_bytes"),
    Path("/sys/fs/cgroup/pids/docker/buildkit/pids.max"),
    Path("/sys/fs/cgroup/docker/buildkit/memory.max"),
    Path("/sys/fs/cgroup/docker/buildkit/memory.swap.max"),
    Path("/sys/fs/cgroup/docker/buildkit/pids.max"),
]
MEMORY_MB, PIDS = 300, 321  # values no one else sets: seeing them proves the build set them

# A Hub process: the settings an operator allowing egress runs with, the Hub's own build options.
HUB_PROCESS = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import docker

    from hub_service.sandbox import build_options, ensure_smoke_network
    from hub_service.settings import HubSettings
    from openenv.images import build_image

    folder, tag, base = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    settings = HubSettings(build_egress=True, build_block_host=True, build_memory="{memory}m", build_pids={pids})
    client = docker.from_env()
    ensure_smoke_network(client)
    if folder.name == "-":
        sys.exit(0)
    result = build_image(
        folder, tag, base_image=base, client=client, timeout_s=240, builder="buildkit", sdk="published",
        on_log=lambda line: print(line, flush=True), **build_options(settings),
    )
    print("built", result.image_id, flush=True)
    """
).format(memory=MEMORY_MB, pids=PIDS)


@pytest.fixture(scope="module")
def host() -> Iterator[None]:
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        require_system("iptables", "the Hub's firewall rules need root and iptables (scripts/systems installs it)")
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    if buildkit_command() is None:
        require_system("BuildKit", "no docker CLI with BuildKit (Debian's docker.io 20.10 or the buildx plugin)")
    if not any(f.is_file() for f in CGROUP_FILES):
        require_system("cgroups", "no BuildKit cgroup of a local engine under /sys/fs/cgroup (root and a local engine)")
    import docker

    from hub_service.sandbox import SMOKE_NETWORK

    client = docker.from_env()
    if not client.networks.list(names=[SMOKE_NETWORK]):  # the engine's own rules for it are not the Hub's
        _hub(Path("-"), "-").check_returncode()
    yield
    for image in client.images.list(name=f"openenv-hub-test-host-{os.getpid()}"):
        client.images.remove(image.id, force=True)


def _snapshot() -> dict[str, str]:
    rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True, check=True).stdout
    # The engine's chain of published ports changes with every container anyone starts: not the Hub's doing.
    rules = "\n".join(line for line in rules.splitlines() if not line.startswith("-A DOCKER "))
    return {"iptables -S": rules, **{str(f): f.read_text() for f in CGROUP_FILES if f.is_file()}}


def _context(tmp_path: Path, run: str) -> Path:
    folder = tmp_path / "ctx"
    folder.mkdir()
    nonce = uuid.uuid4().hex  # never a cached step: the limits are set only while a step runs
    (folder / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nRUN {run} && : {nonce}\n")
    return folder


def _hub(folder: Path, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HUB_PROCESS, str(folder), tag, os.environ.get("OPENENV_TEST_BASE_IMAGE", "")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_hub_that_built_with_egress_and_limits_leaves_firewall_and_cgroups_as_found(
    host: None, tmp_path: Path
) -> None:
    before = _snapshot()
    # Chains of live Hub processes (this test process's own in-process Hubs, say) stay as they are.
    theirs = set(re.findall(r"^-N (OPENENV-HUB-\d+)$", before["iptables -S"], re.M))
    # The step looks at the firewall from the host's side while it runs: the Hub's chain holds the rules.
    during: list[tuple[str, str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
            for line in rules.splitlines():
                words = line.split()
                if line.startswith("-A OPENENV-HUB-") and words[1] not in theirs and "docker0" in words:
                    during.append((words[1], rules))
                    return
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    folder = _context(tmp_path, "true")
    try:
        done = _hub(folder, f"openenv-hub-test-host-{os.getpid()}:egress")
    finally:
        stop.set()
        watcher.join(timeout=30)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"RUN steps are limited to {MEMORY_MB} MiB of memory" in done.stdout, done.stdout[-3000:]
    assert f"RUN steps are limited to {PIDS} processes" in done.stdout, done.stdout[-3000:]
    assert during, f"the Hub's chain never held a rule for docker0; the Hub said:\n{done.stderr[-3000:]}"
    chain, rules = during[0]
    hub = [line for line in rules.splitlines() if chain in line.split()]
    said = f"{rules}\nthe Hub said:\n{done.stderr[-3000:]}"
    assert any(line.startswith("-A INPUT ") and line.endswith(f"-j {chain}") for line in hub), said
    assert any("-i docker0" in line and "DROP" in line for line in hub), said
    assert any("-i oe-hub-smoke0" in line and "DROP" in line for line in hub), said
    # Nothing of the Hub's went into INPUT itself: its rules there are the ones found before plus one jump.
    inputs = [line for line in rules.splitlines() if line.startswith("-A INPUT ")]
    found = [line for line in before["iptables -S"].splitlines() if line.startswith("-A INPUT ")]
    assert [line for line in inputs if line in found] == found, inputs
    assert [line for line in inputs if line not in found] == [line for line in hub if line.startswith("-A INPUT ")]
    assert len([line for line in inputs if line not in found]) == 1, inputs

    assert _snapshot() == before


def test_a_hub_killed_mid_build_leaves_changes_that_openenv_hub_gc_undoes(host: None, tmp_path: Path) -> None:
    before = _snapshot()
    folder = _context(tmp_path, "sleep 20")
    hub = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HUB_PROCESS,
            str(folder),
            f"openenv-hub-test-host-{os.getpid()}:killed",
            os.environ["OPENENV_TEST_BASE_IMAGE"],
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the build's docker CLI goes with it
    )
    try:
        assert hub.stdout is not None
        for line in hub.stdout:  # the step runs under the limits: the state to kill it in
            if f"RUN steps are limited to {MEMORY_MB} MiB" in line:
                break
        deadline = time.monotonic() + 30
        while _snapshot() == before and time.monotonic() < deadline:
            time.sleep(0.1)
        changed = _snapshot()
    finally:
        os.killpg(hub.pid, signal.SIGKILL)
        hub.wait(timeout=30)
    assert changed != before
    assert changed == _snapshot(), "a killed Hub process cannot undo its changes: gc's job"
    gc = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "hub", "gc", "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gc.returncode == 0, gc.stderr
    assert f'"OPENENV-HUB-{hub.pid}"' in gc.stdout and '"build_limits_restored": true' in gc.stdout, gc.stdout
    assert _snapshot() == before


def test_the_clients_caches_in_tests_live_under_the_runs_temp_folder() -> None:
    """Env venvs, downloaded Spaces and server records that tests make stay out of ~/.cache/openenv."""
    import tempfile

    from openenv.client import _settings

    cache = _settings.cache_dir().resolve()
    assert cache.is_relative_to(Path(tempfile.gettempdir()).resolve()), cache
    assert not cache.is_relative_to((Path.home() / ".cache").resolve()), cache
    child = subprocess.run(
        [sys.executable, "-c", "from openenv.client import _settings; print(_settings.state_dir())"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(child.stdout.strip()).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()), child.stdout
