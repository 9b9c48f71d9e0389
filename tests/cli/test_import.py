"""`openenv import` of Gymnasium ids: the folder it writes passes `openenv validate`, serves on
127.0.0.1 and plays with the real client, step for step as Gymnasium itself plays the same seed;
bad input of each kind exits 2 and writes nothing."""

from __future__ import annotations

import base64
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium  # the `gymnasium` extra, which scripts/bootstrap installs
import numpy as np
import pytest

from openenv.cli._detect import scan
from openenv.interop.gymnasium import to_json
from tests.support.cli import Run, openenv_command
from tests.support.servers import ROOT, serve_process

# id → (env folder, an action to send each step)
CLASSIC: dict[str, tuple[str, Any]] = {
    "CartPole-v1": ("cartpole_env", 1),
    "FrozenLake-v1": ("frozen_lake_env", 2),
    "MountainCarContinuous-v0": ("mountain_car_env", [0.5]),
    "Acrobot-v1": ("acrobot_env", 0),
    "Blackjack-v1": ("blackjack_gym_env", 1),
    "CliffWalking-v1": ("cliff_walking_env", 1),
    "MountainCar-v0": ("mountain_car_discrete_env", 2),
    "Pendulum-v1": ("pendulum_env", [0.0]),
    "Taxi-v4": ("taxi_env", 0),
}
# Ids whose top reward the import's search reaches (an oracle is written); the others get none.
PLANNED = {"CartPole-v1", "FrozenLake-v1", "Blackjack-v1", "CliffWalking-v1"}
_PNG = b"\x89PNG\r\n\x1a\n"


def _wire(result: Any) -> Any:
    """The observation's `observation` as JSON (a Tuple space's value is a tuple in the model)."""
    return result.observation.model_dump(mode="json")["observation"]


def _left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture()
def env_package(tmp_path: Path) -> Iterator[Path]:
    """tmp_path on sys.path, so an imported folder's typed client imports as a package; its modules
    leave sys.modules afterwards."""
    before = set(sys.modules)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in set(sys.modules) - before:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.mark.parametrize("env_id", CLASSIC)
def test_an_imported_id_validates_serves_and_plays_as_gymnasium_does(
    env_id: str, run_cli: Run, env_package: Path
) -> None:
    folder, action = CLASSIC[env_id]
    made = run_cli("import", env_id, "-o", folder, "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    version = gymnasium.__version__
    assert doc["source"] == env_id and doc["gymnasium"] == version and doc["render"] is True
    assert doc["requirements"][0].startswith("gymnasium[") and doc["requirements"][0].endswith(f"]=={version}")
    readme = (env_package / folder / "README.md").read_text()
    assert f"`openenv import {env_id}`" in readme and f"Gymnasium](https://gymnasium.farama.org) {version}" in readme
    dockerfile = (env_package / folder / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=" in dockerfile and "FROM ${BASE_IMAGE}" in dockerfile
    assert (env_package / folder / "server" / "requirements.txt").read_text().splitlines()[1:] == doc["requirements"]

    # An id whose oracle the import finds passes every level (its plans replayed on a server that
    # validate starts here); one whose top reward the search does not reach, the static level.
    planned = env_id in PLANNED
    assert (env_package / folder / "validation" / "oracle.json").is_file() == planned
    assert ("No oracle was found" in readme) != planned
    level = "semantic" if planned else "static"
    checked = run_cli("validate", folder, "--level", level, "--json")
    report = json.loads(checked.stdout)
    assert checked.returncode == 0, [r for r in report["results"] if r["status"] == "fail"]
    statuses = {r["check_id"]: r["status"] for r in report["results"]}
    if planned:
        assert statuses["semantic.oracle_max"] == "pass"
        assert "validation/" in (env_package / folder / ".dockerignore").read_text().splitlines()
    if env_id == "FrozenLake-v1":  # and canaries that stay at the floor
        assert statuses["semantic.canary_floor"] == statuses["semantic.floor_gap"] == "pass"

    package = importlib.import_module(folder)
    prefix = next(n[: -len("Env")] for n in package.__all__ if n.endswith("Env"))
    client_cls, action_cls = getattr(package, f"{prefix}Env"), getattr(package, f"{prefix}Action")
    reference = gymnasium.make(env_id)
    expected, _ = reference.reset(seed=3)
    space = reference.observation_space
    with (
        serve_process([openenv_command(), "serve", folder], cwd=env_package) as server,
        client_cls(server.url).sync() as env,
    ):
        first = env.reset(seed=3)
        assert _wire(first) == to_json(space, expected) and not first.done
        frame = env.render()
        assert frame is not None and frame.media_type == "image/png" and frame.data.startswith(_PNG)
        steps, total = 0, 0.0
        for _ in range(40):
            sent = np.asarray(action, dtype=np.float32) if isinstance(action, list) else action
            want, reward, terminated, truncated, _ = reference.step(sent)
            got = env.step(action_cls(action=action))
            steps, total = steps + 1, total + float(reward)
            assert _wire(got) == pytest.approx(to_json(space, want))
            assert got.reward == pytest.approx(float(reward)) and got.done == (terminated or truncated)
            assert got.observation.truncated == truncated
            if got.done:
                break
        state = env.state()
        assert (state.env_id, state.seed, state.step_count) == (env_id, 3, steps)
        assert state.total_reward == pytest.approx(total)
        if not got.done:  # an action outside the space is the client's error
            from openenv.errors import InvalidActionError

            with pytest.raises(InvalidActionError):
                env.step({"action": "not an action"})


def test_an_atari_id_imports_with_its_screen_as_the_observation(run_cli: Run, env_package: Path) -> None:
    made = run_cli("import", "ALE/Pong-v5", "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["name"] == "pong_v5_env" and any(r.startswith("ale-py==") for r in doc["requirements"])
    assert run_cli("validate", "pong_v5_env").returncode == 0
    package = importlib.import_module("pong_v5_env")
    with (
        serve_process([openenv_command(), "serve", "pong_v5_env"], cwd=env_package) as server,
        package.PongV5Env(server.url).sync() as env,
    ):
        first = env.reset(seed=1)
        assert base64.b64decode(first.observation.observation).startswith(_PNG)
        result = env.step(package.PongV5Action(action=1))
        assert result.reward == 0.0 and "lives" in result.observation.info
    schema = package.PongV5Action.model_json_schema()["properties"]["action"]
    assert (schema["minimum"], schema["maximum"]) == (0, 5) and "1 FIRE" in schema["description"]


def test_dict_text_tuple_and_multi_spaces_map_both_ways(tmp_path: Path) -> None:
    """A Dict of every other space, served in-process (its module is no installed distribution, so
    `openenv import` itself refuses it, as the next test shows): what the models say, the server does."""
    import tests.cli.gym_fixtures  # noqa: F401 - registers the ids
    from openenv.cli._gym_models import models_source
    from openenv.interop.gymnasium import GymnasiumEnvironment
    from openenv.testing import serve_app

    reference = gymnasium.make("OpenEnvTests/Dict-v0")
    source = models_source("Odd", "OpenEnvTests/Dict-v0", "x", reference.observation_space, reference.action_space)
    (tmp_path / "odd_models.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        models = importlib.import_module("odd_models")
    finally:
        sys.path.remove(str(tmp_path))

    class OddEnvironment(GymnasiumEnvironment[Any, Any, Any]):
        GYMNASIUM_ID = "tests.cli.gym_fixtures:OpenEnvTests/Dict-v0"
        ACTION, OBSERVATION, STATE = models.OddAction, models.OddObservation, models.OddState

    from openenv import EnvClient, create_app

    app = create_app(OddEnvironment, models.OddAction, models.OddObservation, env_name="odd")
    client_cls = EnvClient[models.OddAction, models.OddObservation, models.OddState]
    with serve_app(app) as url, client_cls(url).sync() as env:
        first = env.reset(seed=0)
        obs = first.observation.observation
        assert (obs.name, obs.keys, obs.flags, obs.odd_key, obs.pair) == ("start", [0, 0], [1, 0, 0], 0, (0, 0))
        assert first.observation.info == {"level": 1}
        act = models.OddAction(action={"move": [0.25, 0.5], "say": "hi", "press": [2, 1]})
        got = env.step(act)
        assert got.observation.observation.pos == [0.25, 0.5] and got.observation.observation.name == "hi"
        assert got.observation.observation.keys == [2, 1] and got.reward == pytest.approx(0.75)
        with pytest.raises(ValueError):  # the model bounds the Box, as the space does
            models.OddAction(action={"move": [2.0, 0.0], "say": "hi", "press": [0, 0]})
        from openenv.errors import EnvExecutionError

        with pytest.raises(EnvExecutionError, match="not in the action space"):  # the Text's charset
            env.step({"action": {"move": [0.0, 0.0], "say": "a b!", "press": [0, 0]}})
    schema = models.OddObservation.model_json_schema()
    assert "odd-key" in json.dumps(schema)  # the key as Gymnasium names it, on the wire


_FIXTURES = "tests.cli.gym_fixtures"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("NoSuchEnv-v0", "'NoSuchEnv-v0' is neither a folder nor a .py file, and Gymnasium cannot make it"),
        ("CartPol-v1", "CartPole"),  # Gymnasium's own suggestion, passed on
        (f"{_FIXTURES}:OpenEnvTests/BrokenImport-v0", "making tests.cli.gym_fixtures:OpenEnvTests/BrokenImport-v0"),
        (f"{_FIXTURES}:OpenEnvTests/Graph-v0", "the observation space Graph("),
        (f"{_FIXTURES}:OpenEnvTests/Dict-v0", "comes from the module 'tests', which no installed distribution"),
        ("openenv_tests_no_such_package:Whatever-v0", "importing the package that registers"),
    ],
)
def test_bad_gymnasium_input_exits_2_naming_what_was_found_and_writes_nothing(
    source: str, says: str, run_cli: Run, tmp_path: Path
) -> None:
    proc = run_cli("import", source, "-o", "out_env", env={"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert _left_behind(tmp_path) == ["hf-home"] or _left_behind(tmp_path) == []


def test_no_module_no_folder_and_an_existing_folder_are_refused(run_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "taken_env").mkdir()
    (tmp_path / "taken_env" / "keep.txt").write_text("mine")
    proc = run_cli("import", "CartPole-v1", "-o", "taken_env")
    assert proc.returncode == 2 and "taken_env already exists" in proc.stderr
    assert _left_behind(tmp_path / "taken_env") == ["keep.txt"]
    proc = run_cli("import", "CartPole-v1", "-o", "Bad-Name")
    assert proc.returncode == 2 and "not a valid env name" in proc.stderr
    proc = run_cli("import", "missing_dir", "--type", "verifiers", "-o", "x_env")
    assert proc.returncode == 2 and "missing_dir does not exist" in proc.stderr
    assert not (tmp_path / "x_env").exists() and not (tmp_path / "Bad-Name").exists()


def test_without_gymnasium_an_id_is_refused_with_what_to_install(run_cli: Run, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "gymnasium"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('gymnasium is shadowed by this test')\n")
    proc = run_cli("import", "CartPole-v1", "-o", "cartpole_env", env={"PYTHONPATH": str(shadow.parent)})
    assert proc.returncode == 2 and "gymnasium is not installed" in proc.stderr
    assert "openenv-hub[gymnasium]" in proc.stderr and not (tmp_path / "cartpole_env").exists()


# -- Verifiers and ORS sources: read, never run --------------------------------------------------------

_VERIFIERS = """
import verifiers as vf
raise SystemExit("this file must never run")

def load_environment(**kwargs):
    return vf.SingleTurnEnv()
"""
_ORS = """
from openreward.environments import Environment as Base
import ors
raise SystemExit("this file must never run")

class Maze(Base):
    pass

class Other(ors.Environment):
    pass

class NotAnEnv:
    pass
"""


def _source(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "src"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_detection_reads_the_source_and_names_what_it_finds(tmp_path: Path) -> None:
    root = _source(
        tmp_path,
        {
            "pkg/env.py": _VERIFIERS,
            "mazes.py": _ORS,
            "broken.py": "def (:\n",
            ".venv/lib/verifiers_copy.py": _VERIFIERS,  # a virtual environment is not the source
            "plain.py": "def load_environment():\n    return 1\n",  # no verifiers import: not one
        },
    )
    found = scan(root)
    assert sorted(c.qualified_name for c in found.candidates) == [
        "mazes:Maze",
        "mazes:Other",
        "pkg.env:load_environment",
    ]
    assert {c.qualified_name: c.kind for c in found.candidates}["mazes:Maze"] == "ors"
    assert found.unreadable == ["broken.py"] and found.files_read == 4
    assert [c.qualified_name for c in scan(root / "pkg" / "env.py").candidates] == ["env:load_environment"]


def test_ambiguous_or_empty_sources_exit_2_with_what_to_pass_and_write_nothing(run_cli: Run, tmp_path: Path) -> None:
    root = _source(tmp_path, {"pkg/env.py": _VERIFIERS, "mazes.py": _ORS})
    cases = [
        (
            (),
            "holds environments of several formats (ors: mazes:Maze, mazes:Other; verifiers: pkg.env:load_environment)",
        ),
        (("--type", "ors"), "holds 2 ORS environments: mazes:Maze, mazes:Other"),
        (("--type", "ors", "--env-class", "Nope"), "--env-class Nope matches none of the environments found"),
    ]
    for extra, says in cases:
        proc = run_cli("import", str(root), *extra, "-o", "out_env")
        assert proc.returncode == 2 and says in proc.stderr, (extra, proc.stderr)
    empty = _source(tmp_path / "e", {"a.py": "x = 1\n"})
    proc = run_cli("import", str(empty), "-o", "out_env")
    assert (
        proc.returncode == 2
        and "no Verifiers or ORS environment in" in proc.stderr
        and "1 Python files read" in proc.stderr
    )
    assert not (tmp_path / "out_env").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out_env")]
