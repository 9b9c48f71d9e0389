"""Pytest plugin: how the suite runs on several pytest-xdist workers (scripts/test, `--dist loadgroup`).

- Each test file is one unit of work (its tests run in order on one worker, sharing its module
  fixtures), unless it names an `xdist_group` itself. Files that must not run at the same time as
  each other share a group: the Ray files each start a three-node cluster (one at a time on a
  2-core machine).
- Tests marked `serial` need the machine to themselves (one restarts the Docker engine every
  other test uses; one checks that nothing the whole run started is left): scripts/test runs them
  in a second pytest run after the parallel one, with `-m serial`, and the first with `-m "not serial"`.
- The longest files are handed out first (their order is in `_FIRST`), so that no worker starts
  a long file when the others are about to finish.
"""

from __future__ import annotations

import pytest

__all__ = ["group_of_item"]

# Files that share a group: they would compete for what only one can have at a time.
_SHARED = {"tests/ray/": "ray"}

# Handed out first, longest first (from the --durations .ci/run prints).
_FIRST: tuple[str, ...] = (
    "tests/training/test_grpo_example.py",
    "tests/docs/test_docs.py",
    "tests/e2e/test_main_command.py",
    "ray",
    "tests/hub/web/test_play_envs.py",
    "tests/hub/test_trust.py",
    "tests/hub/test_pipeline.py",
    "tests/hub/test_hostile_servers.py",
    "tests/envs/coding_env/test_coding.py",
)


def group_of_item(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    for prefix, group in _SHARED.items():
        if path.startswith(prefix):
            return group
    return path


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group_of_item(item.nodeid)))
    if _FIRST and getattr(config.option, "dist", "no") != "no":
        rank = {path: i for i, path in enumerate(_FIRST)}
        # A stable sort: within a file the order stays as written.
        items.sort(key=lambda i: rank.get(group_of_item(i.nodeid), len(rank)))
