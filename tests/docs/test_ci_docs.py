"""docs/ci.md: the example workflow's steps run as GitHub would run them (on a good env and a
broken one), the report script reads real reports, and every snippet of the page runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.checkout import served_git_repo
from tests.support.servers import ROOT

DOC = ROOT / "docs" / "ci.md"
WORKFLOW = ROOT / "docs" / "examples" / "openenv-validate.yml"
SCRIPT = ROOT / "docs" / "examples" / "openenv_report.py"


PROJECT_GIT_URL = "git+https://github.com/openenv-hub/openenv-hub"


@pytest.fixture(scope="module")
def runner_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """PATH of a runner after the workflow's install step, run as written in a fresh venv, with
    the project's git URL pointing at a git copy of this working tree served on 127.0.0.1 (the
    only change to the step)."""
    home = tmp_path_factory.mktemp("runner")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True, timeout=300)
    [install] = [
        s["run"]
        for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["validate"]["steps"]
        if s.get("name") == "Install the OpenEnv CLI"
    ]
    assert PROJECT_GIT_URL in install, install
    path = f"{home / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}, "PATH": path}
    with served_git_repo(home) as url:
        proc = subprocess.run(
            ["bash", "-e", "-c", install.replace(PROJECT_GIT_URL, f"git+{url}")],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (home / "venv" / "bin" / "openenv").is_file()
    yield path


def _run_steps(env_dir: Path, tmp_path: Path, path: str) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """The workflow's other `run:` steps in order, in a checkout of `env_dir`, like a GitHub runner
    after the install step: bash -e per step, GITHUB_STEP_SUMMARY set, stop at the first failure."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert set(workflow[True]) == {"pull_request", "push"}  # YAML reads the key `on` as True
    steps = workflow["jobs"]["validate"]["steps"]
    checkout = tmp_path / env_dir.name  # a runner checks out into a folder named after the repository
    shutil.copytree(env_dir, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / ".github" / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / ".github" / "scripts" / "openenv_report.py")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))},
        "PATH": path,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    ran = []
    for step in steps:
        if "run" not in step or step["name"] == "Install the OpenEnv CLI":
            continue
        proc = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
        )
        ran.append((step["name"], proc))
        if proc.returncode != 0:
            break
    return ran


def test_the_workflow_passes_a_good_env(tmp_path: Path, runner_path: str) -> None:
    ran = _run_steps(ROOT / "envs" / "echo_env", tmp_path, runner_path)
    assert [(name, p.returncode) for name, p in ran] == [("Validate", 0), ("Report", 0)]
    summary = (tmp_path / "summary.md").read_text()
    # a local run cannot build twice, so static.reproducible_build skips, and a skip makes it warn
    assert "⚠️ openenv validate: warn" in summary and "0 failed" in summary
    assert "Not checked: `static.reproducible_build`" in summary


def test_the_workflow_fails_a_broken_env_and_points_at_the_lines(tmp_path: Path, runner_path: str) -> None:
    ran = _run_steps(ROOT / "tests" / "hub" / "envs" / "bad_manifest", tmp_path, runner_path)
    assert [(name, p.returncode) for name, p in ran] == [("Validate", 0), ("Report", 1)]
    summary = (tmp_path / "summary.md").read_text()
    assert "❌ openenv validate: fail" in summary
    assert "| ❌ `static.layout` (`manifest.schema`) | openenv.yaml:6 |" in summary
    assert "use a port number such as 8000" in summary and "| ❌ `static.manifest` |" in summary
    report_out = ran[-1][1].stdout
    assert (
        "::error file=openenv.yaml,line=6::static.layout: manifest.schema: port: input should be a valid integer"
        in report_out
    )


def test_the_script_outside_github_and_with_strict(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    folder = tmp_path / "env"
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "README.md").write_text(
        (folder / "README.md").read_text().replace("  - openenv\n", "  - demo\n")
    )  # a warning: no openenv tag
    out = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", str(folder), "--json", "--no-import"],
        capture_output=True,
        text=True,
    )
    report.write_text(out.stdout)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    plain = subprocess.run([sys.executable, str(SCRIPT), str(report)], capture_output=True, text=True, env=env)
    assert (
        plain.returncode == 0
        and "⚠️ openenv validate: warn" in plain.stdout
        and "::warning file=README.md" in plain.stdout
    )
    strict = subprocess.run(
        [sys.executable, str(SCRIPT), str(report), "--strict"], capture_output=True, text=True, env=env
    )
    assert strict.returncode == 1
    assert subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True).returncode == 3


def test_the_yaml_in_the_page_is_the_workflows() -> None:
    [block] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block.strip() in WORKFLOW.read_text()


# The "Any other CI" block of the page, run in a broken env's folder (the page's own docs test
# hands this block to this file: `covered-by`).
ANY_CI = """openenv validate . --json > openenv-report.json; code=$?
python openenv_report.py openenv-report.json      # prints the summary; exits with the same code
exit $code
"""


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_the_pages_snippets_run(lang: str, tmp_path: Path) -> None:
    blocks = re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    if lang == "bash":
        assert blocks == [ANY_CI], "the page's block changed: update ANY_CI"
    for code in blocks:
        if lang == "python":
            proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert "openenv.yaml:6: manifest.schema" in proc.stdout
        else:  # in a broken env's folder, with the script next to it: exits 1 like the report
            folder = tmp_path / "env"
            shutil.copytree(ROOT / "tests" / "hub" / "envs" / "bad_manifest", folder)
            shutil.copy(SCRIPT, folder / "openenv_report.py")
            env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
            proc = subprocess.run(
                ["bash", "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 1 and "❌ openenv validate: fail" in proc.stdout
