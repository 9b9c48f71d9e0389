"""What a client started is stopped on exit and SIGTERM, and found and removed after a crash."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from openenv.client.providers import lifecycle
from tests.providers.conftest import ECHO_DIR, RUN_LABEL, run_python
from tests.support.servers import ROOT

_START = """
import os, signal, sys, time
from openenv.client.providers import ContainerProvider, ProcessProvider, lifecycle
p = ProcessProvider({echo!r}, venv=False)
p.start()
started = [p]
if {image!r}:
    d = ContainerProvider({image!r})
    d.start()
    started.append(d)
print(lifecycle.this_owner(), flush=True)
"""


def _mine(owner: str) -> list[lifecycle.RunningItem]:
    return [i for i in lifecycle.list_running(labels=dict([RUN_LABEL])) if i.owner == owner]


def _ending(how: str, image: str = "") -> str:
    return _START.format(echo=str(ECHO_DIR), image=image) + how


def test_left_running_at_normal_exit_is_stopped(docker_engine, echo_image: str) -> None:
    out = run_python(_ending("# the script ends without stopping anything", echo_image))
    assert out.returncode == 0, out.stderr
    assert _mine(out.stdout.strip()) == []


def test_sigterm_stops_what_it_started() -> None:
    code = _ending("sys.stdout.flush()\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    owner = proc.stdout.readline().strip()  # type: ignore[union-attr]
    assert [i.kind for i in _mine(owner)] == ["process"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 128 + signal.SIGTERM
    assert _mine(owner) == []


def test_after_a_crash_leftovers_are_listed_and_collected(docker_engine, echo_image: str) -> None:
    out = run_python(_ending("os.kill(os.getpid(), signal.SIGKILL)\n", echo_image))
    assert out.returncode == -signal.SIGKILL
    owner = out.stdout.strip()
    left = _mine(owner)
    assert sorted(i.kind for i in left) == ["container", "process"]
    assert all(i.orphaned and i.owner_alive is False for i in left)
    # a dry run only tells
    assert {i.id for i in lifecycle.gc(labels=dict([RUN_LABEL]), dry_run=True)} >= {i.id for i in left}
    assert len(_mine(owner)) == 2
    removed = lifecycle.gc(labels=dict([RUN_LABEL]))
    assert {i.id for i in removed} >= {i.id for i in left}
    deadline = time.monotonic() + 10
    while _mine(owner) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _mine(owner) == []
    pid = next(int(i.id) for i in left if i.kind == "process")
    assert lifecycle.process_identity(pid) is None


def test_gc_leaves_what_live_clients_use() -> None:
    from openenv.client.providers import ProcessProvider

    with ProcessProvider(ECHO_DIR, venv=False) as provider:
        assert lifecycle.gc(labels=dict([RUN_LABEL])) == []
        assert provider.running
    assert not provider.running


def test_owner_identity() -> None:
    me = lifecycle.this_owner()
    assert lifecycle.owner_alive(me) is True
    host, pid, ticks = me.split(":")
    assert lifecycle.owner_alive(f"{host}:{pid}:{int(ticks) + 1}") is False  # same pid, another process
    assert lifecycle.owner_alive(f"elsewhere:{pid}:{ticks}") is None  # another host: unknown


@pytest.mark.parametrize("raw", ["a", "=b"])
def test_bad_labels_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    from openenv.errors import ConfigurationError

    monkeypatch.setenv("OPENENV_LABELS", raw)
    with pytest.raises(ConfigurationError, match=r"OPENENV_LABELS item .* is not key=value"):
        lifecycle.owner_labels()
