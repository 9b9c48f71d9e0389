"""`openenv ps` and `openenv gc` on what a crashed client left behind."""

from __future__ import annotations

import json
import os
import signal

from openenv.client.providers import lifecycle
from tests.providers.conftest import ECHO_DIR, RUN_LABEL, STATE_DIR, run_python
from tests.support.cli import Run

_CRASH = f"""
import os, signal
from openenv.client.providers import ProcessProvider, lifecycle
ProcessProvider({str(ECHO_DIR)!r}, venv=False).start()
print(lifecycle.this_owner(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _env() -> dict[str, str]:
    # run_cli drops OPENENV_* variables: hand the test run's state dir and labels back explicitly
    return {"OPENENV_STATE_DIR": str(STATE_DIR), "OPENENV_LABELS": os.environ["OPENENV_LABELS"]}


def test_ps_shows_the_orphan_and_gc_removes_it(run_cli: Run) -> None:
    crashed = run_python(_CRASH)
    assert crashed.returncode == -signal.SIGKILL
    owner = crashed.stdout.strip()
    label = f"--label={RUN_LABEL[0]}={RUN_LABEL[1]}"

    listed = run_cli("ps", "--orphaned", "--json", "--no-docker", label, env=_env())
    assert listed.returncode == 0, listed.stderr
    items = [i for i in json.loads(listed.stdout)["items"] if i["owner"] == owner]
    assert [(i["kind"], i["orphaned"]) for i in items] == [("process", True)]
    pid = int(items[0]["id"])

    table = run_cli("ps", "--no-docker", label, env=_env())
    assert "ORPHANED" in table.stdout and items[0]["name"] in table.stdout and "openenv gc" in table.stdout

    dry = run_cli("gc", "--dry-run", "--no-docker", label, env=_env())
    assert f"would remove process {items[0]['name']}" in dry.stdout
    assert lifecycle.process_identity(pid) is not None  # a dry run removes nothing

    removed = run_cli("gc", "--json", "--no-docker", label, env=_env())
    assert removed.returncode == 0, removed.stderr
    assert [i["name"] for i in json.loads(removed.stdout)["removed"]] == [items[0]["name"]]
    assert lifecycle.process_identity(pid) is None
    assert "nothing running" in run_cli("ps", "--no-docker", label, env=_env()).stdout


def test_gc_all_needs_confirmation(run_cli: Run) -> None:
    proc = run_cli("gc", "--all", env=_env())
    assert proc.returncode == 2 and proc.stderr.startswith("error: --all also stops servers") and "--yes" in proc.stderr


def test_bad_label_is_a_usage_error(run_cli: Run) -> None:
    proc = run_cli("ps", "--label", "oops", env=_env())
    assert proc.returncode == 2 and "is not KEY=VALUE" in proc.stderr
