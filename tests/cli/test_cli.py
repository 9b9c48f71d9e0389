"""The `openenv` command itself: help, errors, exit codes, output modes, init, validate, serve, build."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import openenv
from openenv.cli import main as cli_main
from openenv.cli.init import class_prefix
from tests.support.cli import Run
from tests.support.servers import ROOT, free_port, wait_http

HEAVY = ("fastapi", "pydantic", "yaml", "huggingface_hub", "docker", "rich", "uvicorn", "starlette", "httpx")


def test_top_level_help_lists_every_command_and_imports_nothing_heavy() -> None:
    code = (
        "import sys; from openenv.cli.main import main; rc = main(['--help']); "
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0
    for name, (_, summary) in cli_main.COMMANDS.items():
        assert f"{name}" in proc.stdout and summary in proc.stdout
    assert "HEAVY []" in proc.stdout


@pytest.mark.parametrize("command", [*cli_main.COMMANDS, *cli_main.PLUGINS])  # plugins: `hub` (hub_service.cli)
def test_every_command_help_shows_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"usage: openenv {command}" in out and "examples:" in out
    assert f"  openenv {command} " in out.split("examples:")[1]


def test_unknown_commands_and_bad_options_fail_with_usage(run_cli: Run) -> None:
    proc = run_cli("valdate")
    assert (
        proc.returncode == 2
        and proc.stderr.strip() == "error: unknown command 'valdate' — did you mean `openenv validate`?"
    )
    proc = run_cli("validate", "--no-such-flag")
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr


def test_errors_are_one_line_with_a_hint(run_cli: Run, tmp_path: Path) -> None:
    for args in (("serve", str(tmp_path / "nope")), ("build", str(tmp_path)), ("push", str(tmp_path))):
        proc = run_cli(*args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and " — " in lines[0], (
            proc.stderr
        )


def test_an_unexpected_exception_is_an_internal_error_with_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    broken = types.ModuleType("broken_command")
    broken.DESCRIPTION, broken.EXAMPLES = "always fails", "openenv broken"
    broken.add_arguments = lambda parser: None
    broken.run = lambda args, out: 1 / 0
    sys.modules["broken_command"] = broken
    cli_main.COMMANDS["broken"] = ("broken_command", "a command that crashes")
    try:
        assert cli_main.main(["broken"]) == 3
    finally:
        del cli_main.COMMANDS["broken"], sys.modules["broken_command"]
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: internal error: ZeroDivisionError") and "OPENENV_DEBUG=1" in err and "\n" not in err


def test_init_makes_a_working_env_and_refuses_what_it_should(run_cli: Run, tmp_path: Path) -> None:
    proc = run_cli("init", "maze_env", "--json")
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert (
        made["name"] == "maze_env"
        and "server/environment.py" in made["files"]
        and "tests/test_environment.py" in made["files"]
    )
    env = tmp_path / "maze_env"
    assert "class MazeAction(Action)" in (env / "models.py").read_text()
    assert "name: maze_env" in (env / "openenv.yaml").read_text() and "__ENV" not in "".join(
        p.read_text() for p in env.rglob("*.py")
    )
    # The RFC 008 contract comes along: the oracle and canary plans, the image's labels, a pinned SDK.
    assert {"validation/oracle.json", "validation/canaries.json"} <= set(made["files"])
    dockerfile = (env / "Dockerfile").read_text()
    assert 'org.opencontainers.image.title="maze_env"' in dockerfile and "__" not in dockerfile
    assert f'ARG OPENENV_SDK="openenv-hub[server]=={openenv.__version__}"' in dockerfile
    again = run_cli("init", "maze_env")
    assert again.returncode == 2 and "already exists" in again.stderr
    for bad, why in (
        ("Maze-Env", "try `openenv init maze_env`"),
        ("2fast", "try `openenv init env_2fast`"),
        ("json", "shadow"),
        ("server", "shadow"),
    ):
        proc = run_cli("init", bad)
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr
        assert not (tmp_path / bad).exists()
    nested = run_cli("init", "envs/deep_env")
    assert nested.returncode == 0 and (tmp_path / "envs" / "deep_env" / "openenv.yaml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging left behind


def test_class_names_follow_echo_envs_convention() -> None:
    assert [class_prefix(n) for n in ("echo_env", "number_guess", "env", "a_b_env")] == [
        "Echo",
        "NumberGuess",
        "Env",
        "AB",
    ]


def test_validate_human_output_json_document_and_exit_codes(run_cli: Run, tmp_path: Path) -> None:
    assert run_cli("init", "ok_env").returncode == 0
    good = run_cli("validate", "ok_env")
    # every static check holds; the local lane cannot build twice, and that skip makes it a warn
    assert good.returncode == 0 and "ok   static.manifest" in good.stdout and "ok_env: WARN" in good.stdout
    assert "0 failed" in good.stdout and "skip static.reproducible_build" in good.stdout
    (tmp_path / "ok_env" / "openenv.yaml").write_text("spec_version: 1\nname: ok_env\nport: 99999\n")
    bad = run_cli("validate", "ok_env", "--json")
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)  # stdout is exactly one JSON document
    assert doc["verdict"] == "fail" and doc["report_schema_version"] == "2" and doc["manifest"] is None
    failed = {r["check_id"]: r for r in doc["results"] if r["status"] == "fail"}
    assert failed["static.manifest"]["evidence"] == ["openenv.yaml has no `validation:` block"]
    [problem] = [p for p in failed["static.layout"]["measured"]["problems"] if p["check"] == "manifest.schema"]
    assert problem["line"] == 3 and problem["file"] == "openenv.yaml"
    human = run_cli("validate", "ok_env", "-q")
    assert (
        "FAIL static.layout" in human.stdout
        and "openenv.yaml:3:" in human.stdout
        and "fix: use a port number" in human.stdout
    )
    assert "ok   " not in human.stdout
    not_env = run_cli("validate", str(tmp_path / "hf-home"), "--json")
    assert not_env.returncode == 2 and not_env.stdout == "" and "is not a folder" in not_env.stderr
    assert run_cli("validate", "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2").returncode == 1
    legacy = run_cli("validate", "ok_env", "--legacy-report", "--json")  # version 1, for one more release
    assert legacy.returncode == 1 and json.loads(legacy.stdout)["report_version"] == 1


def test_each_time_limit_of_validate_bounds_one_thing_and_is_taken_as_given(
    run_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--timeout` is a request's time (upstream's meaning), `--startup-timeout` the import and
    start-up's; neither is cut short behind the user's back (a request's share was clamped to 30 s)."""
    from openenv.validation import local

    seen: dict[str, float] = {}

    def validate_url(url: str, **kw: object):
        seen["request"] = float(kw["timeout_s"])  # type: ignore[arg-type]
        raise RuntimeError("stop here")

    monkeypatch.setattr(local, "validate_url", validate_url)
    with pytest.raises(RuntimeError, match="stop here"):
        local.validate(url="http://127.0.0.1:9", request_timeout_s=120.0)
    assert seen["request"] == 120.0
    with pytest.warns(DeprecationWarning, match="startup_timeout_s"), pytest.raises(RuntimeError):
        local.validate(url="http://127.0.0.1:9", timeout_s=90.0)
    assert seen["request"] == 90.0
    for flag in ("--timeout", "--startup-timeout"):
        bad = run_cli("validate", "--url", "http://127.0.0.1:9", flag, "0")
        assert bad.returncode == 2 and f"{flag} must be a number of seconds above 0" in bad.stderr, bad.stderr
    assert "--startup-timeout" in run_cli("validate", "--help").stdout


def test_rich_output_when_asked_and_plain_otherwise(run_cli: Run) -> None:
    assert run_cli("init", "fancy_env").returncode == 0
    fancy = run_cli("validate", "fancy_env", env={"NO_COLOR": "", "OPENENV_COLOR": "always"})
    assert fancy.returncode == 0 and "\x1b[" in fancy.stdout and "✓" in fancy.stdout
    plain = run_cli("validate", "fancy_env")
    assert "\x1b[" not in plain.stdout and "ok   static.manifest" in plain.stdout


def test_schema_command_prints_the_published_schemas(run_cli: Run) -> None:
    for which, file in (("manifest", "manifest.schema.json"), ("report", "validate-report.schema.json")):
        proc = run_cli("schema", which)
        assert proc.returncode == 0 and proc.stdout == (ROOT / "docs" / file).read_text()


def test_serve_runs_the_env_and_refuses_a_busy_port(run_cli: Run, tmp_path: Path) -> None:
    assert run_cli("init", "live_env").returncode == 0
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "openenv"), "serve", "live_env", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=30, proc=proc)
        busy = run_cli("serve", "live_env", "--port", str(port))
        assert busy.returncode == 1 and f"port {port} on 127.0.0.1 is already in use" in busy.stderr
        report = run_cli("validate", "--url", f"http://127.0.0.1:{port}", "--json", "--steps", "3")
        doc = json.loads(report.stdout)
        assert report.returncode == 0 and doc["target"] == f"http://127.0.0.1:{port}"
        assert doc["results"][0] == {**doc["results"][0], "check_id": "runtime.startup", "status": "pass"}
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert f"serving live_env on http://127.0.0.1:{port}" in out


def test_serve_reports_a_broken_env_in_one_line(run_cli: Run, tmp_path: Path) -> None:
    assert run_cli("init", "oops_env").returncode == 0
    (tmp_path / "oops_env" / "server" / "environment.py").write_text("def broken(:\n")
    proc = run_cli("serve", "oops_env", "--port", str(free_port()))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "importing server.app failed at server/environment.py:1: SyntaxError" in proc.stderr


def test_build_rejects_bad_build_args(run_cli: Run) -> None:
    assert run_cli("init", "img_env").returncode == 0
    proc = run_cli("build", "img_env", "--build-arg", "NOVALUE")
    assert proc.returncode == 2 and "is not KEY=VALUE" in proc.stderr


def test_init_gives_each_env_its_own_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The template's game draws its secret from the env's name: the oracle `openenv init` writes
    wins that env's game and its canaries lose it, for any name; and the SDK (which every env
    image installs) ships no oracle, so no env made from it has its answer key in its container
    (RFC 008's runtime.oracle_containment)."""
    import importlib
    import json
    import sys

    from openenv.cli.init import render, template_dir

    assert not list(template_dir().rglob("*.json"))
    monkeypatch.syspath_prepend(str(tmp_path))  # each rendered env is a package there
    games = set()
    for name in ("guess_env_a", "guess_env_b", "guess_env_c", "guess_env_d", "guess_env_e"):
        render(tmp_path / name, name)
        game = importlib.import_module(f"{name}.server.environment")
        models = importlib.import_module(f"{name}.models")
        env_class = next(v for k, v in vars(game).items() if k.endswith("Environment") and k != "Environment")
        action_class = next(v for k, v in vars(models).items() if k.endswith("Action") and k != "Action")

        def play(plan: dict[str, Any], env_class: Any = env_class, action_class: Any = action_class) -> float:
            env = env_class()
            env.reset(seed=plan["reset"]["seed"], **plan["reset"]["options"])
            reward = 0.0
            for action in plan["actions"]:
                obs = env.step(action_class(**action))
                reward = obs.reward
                if obs.done:
                    break
            return reward

        oracle = json.loads((tmp_path / name / "validation" / "oracle.json").read_text())
        canaries = json.loads((tmp_path / name / "validation" / "canaries.json").read_text())["canaries"]
        assert play(oracle) == 1.0, (name, oracle)
        assert [play(c) for c in canaries] == [0.0, 0.0], (name, canaries)
        games.add(tuple(a["guess"] for a in oracle["actions"]))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]
    assert len(games) > 1  # the names give different games
