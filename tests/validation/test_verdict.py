"""Schema-true actions and the verdict rule (openenv/validation/examples.py, episode.py; docs/validate.md).

Every action the example builder makes must validate against the JSON Schema it came from
(checked with `jsonschema`) and against the pydantic model that produced the schema, which, unlike
the schema, insists on a discriminated union's tag. The verdict rule is tried on real servers.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from openenv import Action, Environment, Observation, State, create_app
from openenv.client import GenericEnvClient
from openenv.client.sync import run_sync
from openenv.validation import validate_folder, validate_url
from openenv.validation.episode import StepRecord, judge, play_episode
from openenv.validation.examples import example_from_schema
from tests.support.servers import serve_app

# -- the shapes actions take -----------------------------------------------------------------------


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Move(BaseModel):
    kind: Literal["move"] = "move"
    dx: int = Field(ge=-1, le=1)
    dy: int = Field(ge=-1, le=1)


class Paint(BaseModel):
    kind: Literal["paint"] = "paint"
    color: Color
    strength: float = Field(default=0.5, gt=0, le=1)


class Wait(BaseModel):
    kind: Literal["wait"] = "wait"


Command = Annotated[Move | Paint | Wait, Field(discriminator="kind")]


class UnionAction(Action):
    command: Command


class ListOfUnionsAction(Action):
    plan: list[Command] = Field(min_length=2)


class Point(BaseModel):
    x: int = Field(ge=0, le=7)
    y: int = Field(ge=0, le=7)


class NestedAction(Action):
    origin: Point
    path: list[Point] = Field(default_factory=list)
    label: str | None = None
    mode: Literal["fast", "slow"]
    version: Literal[2] = 2
    color: Color = Color.BLUE
    code: str = Field(pattern=r"^[A-Z]{2}-\d{3}$")


class PlainUnionAction(Action):
    target: int | str
    choice: Move | Paint = Field(union_mode="left_to_right")


class Tool(BaseModel):
    tool: Literal["search", "open"] = "search"


class ConstTagAction(Action):
    type: Literal["call"] = "call"
    name: str = Field(min_length=1)
    options: Tool = Tool()


MODELS: list[type[BaseModel]] = [UnionAction, ListOfUnionsAction, NestedAction, PlainUnionAction, ConstTagAction]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_built_action_validates_against_its_schema_and_its_model(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    for variant in range(8):
        action = example_from_schema(schema, variant=variant)
        jsonschema.validate(action, schema)
        model.model_validate(action)  # the model insists on the union's tag; the schema alone does not


def test_a_discriminated_union_gets_its_tag_and_every_branch_is_tried() -> None:
    schema = UnionAction.model_json_schema()
    commands = [example_from_schema(schema, variant=v)["command"] for v in range(3)]
    assert sorted(c["kind"] for c in commands) == ["move", "paint", "wait"]
    assert all(UnionAction.model_validate({"command": c}) for c in commands)


def test_a_tag_with_a_default_is_sent_outside_a_union_too() -> None:
    action = example_from_schema(ConstTagAction.model_json_schema())
    assert action["type"] == "call" and action["name"]


# -- the rule on records ---------------------------------------------------------------------------


def _r(request: str, outcome: str, code: str | None = None, index: int = 1) -> StepRecord:
    return StepRecord(index, request, "{}", outcome, "...", code)


def test_the_rule_on_each_kind_of_episode() -> None:
    reset, state = _r("reset", "ok"), _r("state", "ok")
    refused = _r("step", "refused", "EXECUTION_ERROR")
    cases = {
        "refusals beside a success": ([reset, refused, _r("step", "ok"), state], "PASSED"),
        "every step raised": ([reset, refused, refused, state], "NO_STEP_SUCCEEDED"),
        "every step rejected": ([reset, _r("step", "refused", "VALIDATION_ERROR"), state], "NO_STEP_SUCCEEDED"),
        "the session died": ([reset, _r("step", "ok"), _r("step", "died", "EnvDisconnectedError")], "SESSION_DIED"),
        "an unknown error code": ([reset, _r("step", "ok"), _r("step", "internal", "BOOM"), state], "INTERNAL_ERROR"),
        "state raised": ([reset, _r("step", "ok"), _r("state", "refused", "EXECUTION_ERROR")], "INTERNAL_ERROR"),
        "nothing to send": ([reset, state], "NO_ACTION"),
    }
    assert {name: judge(records).code for name, (records, _) in cases.items()} == {
        name: code for name, (_, code) in cases.items()
    }


# -- the rule on real servers ----------------------------------------------------------------------


class Board(Environment[UnionAction, Observation, State]):
    """Each cell once: a second Move to the same place is an illegal move (it raises)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[int, int]] = set()
        self._state = State(episode_id="e", step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._seen = set()
        self._state = State(episode_id=episode_id or "e", step_count=0)
        return Observation()

    def step(self, action: UnionAction, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        command = action.command
        if isinstance(command, Move):
            if (command.dx, command.dy) in self._seen:
                raise ValueError("illegal move: already there")
            self._seen.add((command.dx, command.dy))
        self._state.step_count += 1
        return Observation(reward=1.0)

    @property
    def state(self) -> State:
        return self._state


class BrokenBoard(Board):
    def step(self, action: UnionAction, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise AttributeError("'StepResult' object has no attribute 'model_dump'")


def _episode(url: str, steps: int = 6) -> Any:
    async def play() -> Any:
        client = GenericEnvClient(url, message_timeout_s=10, connect_timeout_s=10)
        try:
            return await play_episode(client, UnionAction.model_json_schema(), steps)
        finally:
            await client.close()

    return run_sync(play())


def test_a_union_env_passes_with_its_illegal_moves_recorded_as_refusals() -> None:
    with serve_app(create_app(Board, UnionAction, Observation)) as url:
        episode = _episode(url)
        report = validate_url(url, latency_steps=3)
    assert episode.verdict.code == "PASSED", episode.as_data()
    steps = episode.steps()
    assert all('"kind": ' in r.sent for r in steps)  # every action carried its tag
    assert {r.outcome for r in steps} == {"ok", "refused"}  # the repeated Move raised; the rest were played
    assert report.results("runtime.step")[0].status == "pass" and report.status == "pass"


def test_an_env_that_raises_on_every_step_fails_in_both_validators_alike() -> None:
    with serve_app(create_app(BrokenBoard, UnionAction, Observation)) as url:
        episode = _episode(url)
        report = validate_url(url)
    assert episode.verdict.code == "NO_STEP_SUCCEEDED" and not episode.verdict.ok
    assert "has no attribute 'model_dump'" in episode.verdict.reason
    step = report.results("runtime.step")[0]
    assert step.status == "fail" and step.details["verdict"] == "NO_STEP_SUCCEEDED" and report.exit_code == 1


# -- the import probe installs the way the Dockerfile does -------------------------------------------


def _env_folder(root: Path, name: str, app_imports: str, dependencies: list[str]) -> Path:
    env = root / name
    (env / "server").mkdir(parents=True)
    (env / "__init__.py").write_text("")
    (env / "server" / "__init__.py").write_text("")
    (env / "models.py").write_text(
        "from openenv import Action, Environment, Observation, State\n\n\n"
        "class CountAction(Action):\n    add: int = 1\n\n\n"
        "class Counter(Environment):\n"
        "    def reset(self, seed=None, episode_id=None, **kw):\n        return Observation()\n\n"
        "    def step(self, action, timeout_s=None, **kw):\n        return Observation()\n\n"
        "    @property\n    def state(self):\n        return State(episode_id=None, step_count=0)\n"
    )
    (env / "server" / "app.py").write_text(
        app_imports + "from openenv import Observation, create_app\n\n"
        "app = create_app(Counter, CountAction, Observation)\n"
    )
    (env / "openenv.yaml").write_text(
        f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    )
    deps = ", ".join(f'"{d}"' for d in ["openenv-hub", *dependencies])
    (env / "pyproject.toml").write_text(
        f'[project]\nname = "openenv-{name}"\nversion = "0.1.0"\ndependencies = [{deps}]\n\n'
        f'[tool.setuptools]\npackages = ["{name}", "{name}.server"]\n'
        f'package-dir = {{ "{name}" = ".", "{name}.server" = "server" }}\n'
    )
    (env / "Dockerfile").write_text(
        'FROM python:3.11-slim\nWORKDIR /app/env\nCOPY . /app/env\nRUN pip install -e .\nCMD ["uvicorn", "server.app:app"]\n'
    )
    return env


def test_an_env_that_imports_its_own_package_by_name_imports_as_installed(tmp_path: Path) -> None:
    env = _env_folder(tmp_path, "tally_env", "from tally_env.models import CountAction, Counter\n", [])
    report = validate_folder(env)
    result = report.results("app.import")[0]
    assert result.status == "pass", result
    assert result.details["import_mode"] == "installed" and "tally_env" in result.message


def test_a_declared_dependency_named_like_the_env_is_not_installed_here_not_broken(tmp_path: Path) -> None:
    # The manifest's name is that of a dependency the pyproject declares (and this Python lacks).
    env = _env_folder(
        tmp_path,
        "zq_tables_h1",
        "import zq_tables_h1_dep\nfrom models import CountAction, Counter\n",
        ["zq-tables-h1-dep"],
    )
    (env / "openenv.yaml").write_text(
        "spec_version: 1\nname: zq_tables_h1_dep\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    )
    report = validate_folder(env)
    result = report.results("app.import")[0]
    assert result.status == "warn" and "not installed in this Python" in result.message, result
    assert result.details["missing_module"] == "zq_tables_h1_dep"
