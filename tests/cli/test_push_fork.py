"""`openenv push` and `openenv fork` against the stand-in Hub, with huggingface_hub 2.x and 1.x.

Each test runs the real `openenv` command of a venv: this project's (huggingface_hub 2.x) and
the one scripts/hf1-venv makes (the oldest huggingface_hub 1.x). Nothing is patched: the
command finds the Hub through HF_ENDPOINT and authenticates with HF_TOKEN.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cli import Run
from tests.support.hf_hub import HubStandIn


@pytest.fixture(params=["hub-2.x", "hub-1.x"])
def hub_python(request: pytest.FixtureRequest) -> str:
    """The Python whose `openenv` runs, checked to carry the huggingface_hub major it claims."""
    python = sys.executable if request.param == "hub-2.x" else request.getfixturevalue("hf1_python")
    major = subprocess.run(
        [python, "-c", "import huggingface_hub as h; print(h.__version__.split('.')[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert major == request.param[-3], f"{python} has huggingface_hub {major}.x"
    return python


def _front_matter(text: bytes) -> dict:
    lines = text.decode().splitlines()
    end = lines.index("---", 1)
    return yaml.safe_load("\n".join(lines[1:end]))


def test_push_publishes_a_new_env_as_a_docker_space(
    run_cli: Run, hf_hub: HubStandIn, hub_python: str, tmp_path: Path
) -> None:
    assert run_cli("init", "guess_env").returncode == 0
    env = {**hf_hub.client_env(), "MY_KEY": "s3cret"}
    proc = run_cli(
        "push",
        "guess_env",
        "--var",
        "LEVEL=3",
        "--secret",
        "MY_KEY",
        "--exclude",
        "tests",
        "--json",
        env=env,
        python=hub_python,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    space = hf_hub.space("alice/guess_env")
    assert result["repo_id"] == "alice/guess_env" and result["commit"] == space.refs["main"]
    assert (
        result["url"] == f"{hf_hub.url}/spaces/alice/guess_env"
        and result["app_url"] == "https://alice-guess-env.hf.space"
    )
    files = hf_hub.files("alice/guess_env")
    assert {"Dockerfile", "openenv.yaml", "server/app.py", "server/environment.py", "README.md"} <= set(files)
    assert not any(p.startswith("tests/") for p in files)
    front = _front_matter(files["README.md"])
    assert front["sdk"] == "docker" and front["app_port"] == 8000 and front["tags"][:2] == ["openenv", "example"]
    assert space.sdk == "docker" and space.runtime["stage"] == "RUNNING"
    assert space.variables["LEVEL"]["value"] == "3" and space.secrets["MY_KEY"]["value"] == "s3cret"
    assert "s3cret" not in proc.stdout + proc.stderr
    human = run_cli("push", "guess_env", env=env, python=hub_python)  # again: the same Space, no error
    assert human.returncode == 0, human.stderr
    assert (
        f"Space: {hf_hub.url}/spaces/alice/guess_env" in human.stdout
        and "App:   https://alice-guess-env.hf.space" in human.stdout
    )


def test_push_as_a_pull_request_leaves_main_alone(
    run_cli: Run, hf_hub: HubStandIn, hub_python: str, tmp_path: Path
) -> None:
    assert run_cli("init", "pr_env").returncode == 0
    env = hf_hub.client_env()
    assert run_cli("push", "pr_env", "--repo-id", "openenv-org/pr_env", env=env, python=hub_python).returncode == 0
    main_before = hf_hub.space("openenv-org/pr_env").refs["main"]
    models = tmp_path / "pr_env" / "models.py"
    models.write_text(models.read_text().replace("Your guess, from 1 to 100.", "A guess."))
    proc = run_cli(
        "push",
        "pr_env",
        "--repo-id",
        "openenv-org/pr_env",
        "--create-pr",
        "-m",
        "Shorter docs",
        "--var",
        "X=1",
        "--json",
        env=env,
        python=hub_python,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["pr_url"] == f"{hf_hub.url}/spaces/openenv-org/pr_env/discussions/1"
    assert any("not set for a pull request" in n for n in result["notes"])
    space = hf_hub.space("openenv-org/pr_env")
    assert space.refs["main"] == main_before and "X" not in space.variables
    assert b"A guess." in hf_hub.files("openenv-org/pr_env", "refs/pr/1")["models.py"]
    assert b"A guess." not in hf_hub.files("openenv-org/pr_env")["models.py"]
    [pr] = space.discussions
    assert pr.is_pull_request and pr.title == "Shorter docs"


def test_push_refuses_an_invalid_env_and_reports_hub_refusals(
    run_cli: Run, hf_hub: HubStandIn, hub_python: str, tmp_path: Path
) -> None:
    assert run_cli("init", "nope_env").returncode == 0
    env = hf_hub.client_env()
    readme = tmp_path / "nope_env" / "README.md"
    readme.write_text(readme.read_text().replace("sdk: docker", "sdk: gradio"))
    invalid = run_cli("push", "nope_env", env=env, python=hub_python)
    assert invalid.returncode == 1 and "does not pass validation" in invalid.stderr and "readme.sdk" in invalid.stdout
    assert ("space", "alice/nope_env") not in hf_hub.store.repos
    readme.write_text(readme.read_text().replace("sdk: gradio", "sdk: docker"))
    hf_hub.add_user("bob")
    foreign = run_cli("push", "nope_env", "--repo-id", "bob/nope_env", env=env, python=hub_python)
    assert foreign.returncode == 1 and "cannot write to bob/nope_env" in foreign.stderr
    assert foreign.stderr.strip().count("\n") == 0
    no_token = run_cli("push", "nope_env", env={"HF_ENDPOINT": hf_hub.url}, python=hub_python)
    assert no_token.returncode == 1 and "not logged in" in no_token.stderr
    bad_token = run_cli("push", "nope_env", env=hf_hub.client_env(token="hf_wrong"), python=hub_python)
    assert bad_token.returncode == 1 and "token was refused" in bad_token.stderr


def test_fork_duplicates_a_space(run_cli: Run, hf_hub: HubStandIn, hub_python: str) -> None:
    hf_hub.add_user("bob")
    hf_hub.create_space(
        "bob/chess_env", files={"Dockerfile": "FROM python:3.11-slim\n", "openenv.yaml": "name: chess_env\n"}
    )
    env = hf_hub.client_env()
    proc = run_cli("fork", "bob/chess_env", "--json", env=env, python=hub_python)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["repo_id"] == "alice/chess_env" and result["url"] == f"{hf_hub.url}/spaces/alice/chess_env"
    assert hf_hub.files("alice/chess_env")["openenv.yaml"] == b"name: chess_env\n"
    by_url = run_cli(
        "fork",
        "https://huggingface.co/spaces/bob/chess_env",
        "--repo-id",
        "openenv-org/chess2",
        "--var",
        "LEVEL=hard",
        "--private",
        env=env,
        python=hub_python,
    )
    assert by_url.returncode == 0, by_url.stderr
    copy = hf_hub.space("openenv-org/chess2")
    assert copy.private and copy.variables["LEVEL"]["value"] == "hard"
    assert "App:   https://openenv-org-chess2.hf.space" in by_url.stdout
    again = run_cli("fork", "bob/chess_env", env=env, python=hub_python)
    assert again.returncode == 1 and "already exists" in again.stderr
    missing = run_cli("fork", "bob/no_such_env", env=env, python=hub_python)
    assert missing.returncode == 1 and "bob/no_such_env was not found" in missing.stderr
    bad = run_cli("fork", "not-an-id", env=env, python=hub_python)
    assert bad.returncode == 2 and "owner/name" in bad.stderr
