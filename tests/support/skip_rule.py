"""Pytest plugin: under CI, a run that skipped anything fails.

CI has every system (scripts/test starts them), so any skip means a test that should have run did
not. The rule sees every kind of skip: a test's own (`pytest.skip`, skip marks, `require_system`
outside CI), and skips raised while collecting: a module-level `pytest.importorskip` or
`pytest.skip(allow_module_level=True)` drops a whole file through a *collection* report, which
`pytest_runtest_logreport` never sees. `OPENENV_TEST_ALLOW_SKIPS=1` allows skips for a partial run
on a developer's machine; `.ci/run` clears it.

Loaded by tests/conftest.py (`pytest_plugins`); tests/test_ci_rules.py runs it on a scratch suite.
Under pytest-xdist the controller receives every worker's skip reports and applies the rule once.
"""

from __future__ import annotations

import os

import pytest

from tests.support.systems import in_ci

__all__ = ["SkipRule", "skips_fail_run"]


def skips_fail_run() -> bool:
    """Whether a skip fails this run: CI is set and no one allowed skips for a partial run."""
    return in_ci() and os.environ.get("OPENENV_TEST_ALLOW_SKIPS") != "1"


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


class SkipRule:
    """Collects every skip of the run; fails the run at the end when `skips_fail_run()`."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module (or class, or package) that skipped while being collected: all its tests are gone.
        if report.skipped:
            self.skipped.append(f"{report.nodeid or '<collection>'} (whole file, at collection): {_reason(report)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped.append(f"{report.nodeid}: {_reason(report)}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.skipped or not skips_fail_run():
            return
        # NO_TESTS_COLLECTED too: a run whose only file skipped at collection must not pass as "empty".
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.skipped or not skips_fail_run():
            return
        write = terminalreporter.write_line
        write(
            f"CI is set and {len(self.skipped)} skip(s) happened; the run fails (every test must run in CI):", red=True
        )
        for line in self.skipped[:50]:
            write(f"  SKIPPED {line}")


def pytest_configure(config: pytest.Config) -> None:
    # Not on a pytest-xdist worker: its reports go to the controller, which applies the rule once.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipRule(), "openenv-skip-rule")
