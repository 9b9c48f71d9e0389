"""Pytest plugin: each group's time (a group is a top-level folder of tests/, e.g. `tests/hub`).

`.ci/run` loads it (`-p tests.support.group_times`) so every CI log says where the minutes went;
the times are the sum of each test's set-up, call and tear-down (under pytest-xdist, summed over
the workers: busy time, not wall time). It also writes them to `OPENENV_TEST_GROUP_TIMES` (a JSON
file) when that is set, for a note comparing two runs, and each file's busy seconds to
`OPENENV_TEST_FILE_TIMES` when that is set (what the order of tests/support/parallel.py comes from).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

__all__ = ["GroupTimes", "group_of"]


def group_of(nodeid: str) -> str:
    """`tests/hub/test_x.py::test_y` -> `tests/hub`; a file right under tests/ is its own group."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) >= 3:
        return "/".join(parts[:2])
    return path


class GroupTimes:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)
        self.files: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        group = group_of(report.nodeid)
        self.seconds[group] += report.duration
        self.files[report.nodeid.split("::", 1)[0]] += report.duration
        if report.when == "call":
            self.tests[group] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.seconds:
            return
        terminalreporter.section("time per group (set-up + call + tear-down)")
        for group, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:8.1f} s  {self.tests[group]:5d} tests  {group}")
        _write_file_times(self.files)
        out = os.environ.get("OPENENV_TEST_GROUP_TIMES")
        if out:
            table: dict[str, dict[str, float]] = {}
            # The serial run that follows the parallel one (scripts/test) adds its times to the same file.
            if os.environ.get("OPENENV_TEST_GROUP_TIMES_APPEND") == "1" and Path(out).exists():
                table = json.loads(Path(out).read_text())
            for group, seconds in self.seconds.items():
                row = table.setdefault(group, {"seconds": 0.0, "tests": 0})
                row["seconds"] = round(row["seconds"] + seconds, 1)
                row["tests"] += self.tests[group]
            Path(out).write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


def _write_file_times(files: dict[str, float]) -> None:
    out = os.environ.get("OPENENV_TEST_FILE_TIMES")
    if not out:
        return
    table: dict[str, float] = {}
    if os.environ.get("OPENENV_TEST_GROUP_TIMES_APPEND") == "1" and Path(out).exists():
        table = json.loads(Path(out).read_text())  # the serial run adds to what the parallel one wrote
    for path, seconds in files.items():
        table[path] = round(table.get(path, 0.0) + seconds, 1)
    ordered = dict(sorted(table.items(), key=lambda item: -item[1]))
    Path(out).write_text(json.dumps(ordered, indent=2) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the xdist controller gets every worker's reports
        config.pluginmanager.register(GroupTimes(), "openenv-group-times")
