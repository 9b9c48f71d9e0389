"""The suite's own rules: under CI any skip fails the run, and `.ci/run` sets CI itself.

Each case runs pytest in a subprocess on a scratch suite of one or two files, with only the skip
rule plugin (tests/support/skip_rule.py) loaded, exactly as tests/conftest.py loads it. `.ci/run`
is run from a scratch copy of the repository layout whose scripts/lint and scripts/test are stand-ins
that report the environment they were given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT

PASSING = "def test_ok():\n    assert 1 + 1 == 2\n"

SKIPS = {
    "importorskip": "import pytest\npytest.importorskip('no_such_module_for_the_skip_rule')\n" + PASSING,
    "module_skip": "import pytest\npytest.skip('not here', allow_module_level=True)\n" + PASSING,
    "test_skip": "import pytest\n" + PASSING + "def test_skips():\n    pytest.skip('not today')\n",
    "skip_mark": "import pytest\n" + PASSING + "@pytest.mark.skip(reason='marked')\ndef test_marked():\n    pass\n",
}


def _run_pytest(suite: Path, files: dict[str, str], **env: str) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (suite / name).write_text(text)
    (suite / "pytest.ini").write_text("[pytest]\n")
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "OPENENV_TEST_ALLOW_SKIPS")}
    # No plugin autoload (hypothesis, schemathesis, playwright...): the rule alone, and a second, not five.
    extra = env.pop("XDIST_ARGS", "").split()
    environ.update(env, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.support.skip_rule",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            *extra,
        ],
        cwd=suite,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("kind", sorted(SKIPS))
def test_under_ci_any_skip_fails_the_run(tmp_path: Path, kind: str) -> None:
    out = _run_pytest(tmp_path, {"test_other.py": PASSING, f"test_{kind}.py": SKIPS[kind]}, CI="true")
    assert out.returncode == pytest.ExitCode.TESTS_FAILED, out.stdout + out.stderr
    assert "skip(s) happened; the run fails" in out.stdout
    assert f"test_{kind}.py" in out.stdout.split("the run fails", 1)[1]
    if kind in ("importorskip", "module_skip"):
        assert "(whole file, at collection)" in out.stdout


@pytest.mark.parametrize("kind", ["importorskip", "test_skip"])
def test_under_ci_a_skip_on_a_parallel_worker_fails_the_run(tmp_path: Path, kind: str) -> None:
    # scripts/test runs the suite on pytest-xdist workers: the rule sees their skips too.
    out = _run_pytest(
        tmp_path, {"test_other.py": PASSING, f"test_{kind}.py": SKIPS[kind]}, CI="true", XDIST_ARGS="-p xdist -n 2"
    )
    assert "bringing up nodes" in out.stdout, out.stdout + out.stderr  # it ran on xdist workers
    assert out.returncode == pytest.ExitCode.TESTS_FAILED, out.stdout + out.stderr
    assert "skip(s) happened; the run fails" in out.stdout and f"test_{kind}.py" in out.stdout


def test_a_run_whose_only_file_skips_at_collection_fails_under_ci(tmp_path: Path) -> None:
    # Nothing collected at all must not read as an empty, green run.
    out = _run_pytest(tmp_path, {"test_only.py": SKIPS["importorskip"]}, CI="1")
    assert out.returncode == pytest.ExitCode.TESTS_FAILED, out.stdout + out.stderr


@pytest.mark.parametrize("env", [{}, {"CI": "false"}, {"CI": "true", "OPENENV_TEST_ALLOW_SKIPS": "1"}])
def test_outside_ci_or_when_allowed_skips_pass(tmp_path: Path, env: dict[str, str]) -> None:
    out = _run_pytest(
        tmp_path, {"test_importorskip.py": SKIPS["importorskip"], "test_skip.py": SKIPS["test_skip"]}, **env
    )
    assert out.returncode == pytest.ExitCode.OK, out.stdout + out.stderr
    assert "the run fails" not in out.stdout


def test_a_clean_run_under_ci_passes(tmp_path: Path) -> None:
    out = _run_pytest(tmp_path, {"test_other.py": PASSING}, CI="true")
    assert out.returncode == pytest.ExitCode.OK, out.stdout + out.stderr


def test_ci_run_sets_ci_itself_and_clears_the_escape_hatch(tmp_path: Path) -> None:
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "lint").write_text("echo lint ran >&2\n")
    (tmp_path / "scripts" / "test").write_text(
        'echo "CI=${CI-unset} ALLOW=${OPENENV_TEST_ALLOW_SKIPS-unset} args=$*"\nexit 3\n'
    )
    environ = {k: v for k, v in os.environ.items() if k != "CI"}
    environ["OPENENV_TEST_ALLOW_SKIPS"] = "1"
    out = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], env=environ, capture_output=True, text=True, timeout=60
    )
    assert "CI=true ALLOW=unset" in out.stdout, out.stdout + out.stderr
    assert "-p tests.support.group_times" in out.stdout
    # The tests' exit status is CI's, and the run's time is printed either way.
    assert out.returncode == 3
    assert ".ci/run: the whole run took 0 min" in out.stderr
