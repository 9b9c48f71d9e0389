"""Pytest plugin: how the suite runs on several pytest-xdist workers (scripts/test, `--dist loadgroup`).

- Each test file is one unit of work (its tests run in order on one worker, sharing its module
  fixtures): the scheduler below. Files that must not run at the same time as
  each other share a group: the Ray files each start a three-node cluster (one at a time on a
  2-core machine).
- Tests marked `pages` (the website's Gradio page tests in Chromium) do not run beside the
  parallel workers, for CPU (tests/support/browser.py): scripts/test runs them in a second pytest
  run, on two workers. Tests marked `serial` need the machine to themselves (one restarts the
  Docker engine every other test uses; one checks that nothing the whole run started is left):
  a third run, alone. The first run, `-m "not serial and not pages"`, writes the node ids it left
  for them (`later-<worker>.txt` in the run's state folder), so that those runs import only their
  own test files instead of collecting the whole suite again (about 20 s each).
- The longest files are handed out first (their order is in `_FIRST`), so that no worker starts
  a long file when the others are about to finish.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

__all__ = ["group_of_item"]

# Files that share a group: they would compete for what only one can have at a time.
_SHARED = {"tests/ray/": "ray"}

# Handed out first, longest first (the busy seconds of each file in the last fresh-clone runs:
# OPENENV_TEST_FILE_TIMES, tests/support/group_times.py). Longest first keeps the tail short: a
# long file handed out last would run alone while the other workers sit idle.
_FIRST: tuple[str, ...] = (
    "tests/docs/test_docs.py",
    "tests/test_benchmarks.py",
    "tests/training/test_grpo_example.py",
    "tests/validation/test_upstream_shapes.py",
    "tests/hub/test_upstream_spaces.py",
    "tests/hub/test_pipeline.py",
    "tests/hub/test_mcp_session_smoke.py",
    "tests/validation/test_mcp_session_path.py",
    "tests/hub/test_images_gc.py",
    "tests/e2e/test_main_command.py",
    "tests/hub/test_registry_publish.py",
    "tests/hub/test_catalog_shards.py",
    "tests/validation/test_rfc008_runtime_agreement.py",
    "ray",
    "tests/hub/test_faults.py",
    "tests/hub/test_infrastructure.py",
    "tests/hub/test_leftovers.py",
    "tests/validation/test_verdict_interop.py",
    "tests/hub/test_prbot_docker.py",
    "tests/hub/test_hostile_servers.py",
    "tests/fuzz/test_hub_api_fuzz.py",
    "tests/envs/coding_env/test_coding.py",
    "tests/validation/test_runtime.py",
    "tests/hub/test_sandbox.py",
    "tests/hub/test_trust.py",
    # The page run's files (scripts/test), longest first.
    "tests/hub/web/test_play_envs.py",
    "tests/hub/web/test_browser.py",
    "tests/hub/web/test_leaderboard_web.py",
)


_RESTARTS_ENGINE = {
    "tests/hub/test_faults.py::test_a_stopping_engine_is_seen_as_gone_at_once",
    "tests/hub/test_faults.py::test_docker_engine_restart_mid_build",
}


def group_of_item(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    for prefix, group in _SHARED.items():
        if path.startswith(prefix):
            return group
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        # One process (the serial run, or OPENENV_TEST_WORKERS=1): the engine restart goes last (before
        # the leftover check), so that no other test meets a just-restarted engine's start-up.
        items.sort(key=lambda i: i.nodeid.split("[", 1)[0] in _RESTARTS_ENGINE)
        return
    # On the workers (they collect; the controller hands out work in the order they report).
    if _FIRST:
        rank = {group: i for i, group in enumerate(_FIRST)}
        # A stable sort: within a file the order stays as written.
        items.sort(key=lambda i: rank.get(group_of_item(i.nodeid), len(rank)))


def pytest_deselected(items: list[pytest.Item]) -> None:
    """On the parallel run's workers: note the tests left for the page and serial runs, in
    collection order (a tab between kind and node id), for scripts/test to name them there."""
    worker, state = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("OPENENV_TEST_STATE_DIR")
    if not worker or not state:
        return
    lines = []
    for item in items:
        kind = "serial" if item.get_closest_marker("serial") else "pages" if item.get_closest_marker("pages") else None
        if kind:
            lines.append(f"{kind}\t{item.nodeid}\n")
    if lines:
        with open(os.path.join(state, f"later-{worker}.txt"), "a", encoding="utf-8") as out:
            out.writelines(lines)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: unknown when it is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with our groups: a unit of work is `group_of_item` of each test. (xdist's
    own loadgroup reads `xdist_group` marks by rewriting node ids, which pytest 9 no longer lets a
    plugin do: its groups silently fall apart into single tests.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of_item(nodeid)

    return FileGroups(config, log)
