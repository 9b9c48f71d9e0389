"""`@tool` and `tools_of`: schemas from type hints and docstrings, argument checks, naming rules."""

from __future__ import annotations

import pytest

from openenv import ConfigurationError, Environment, tool
from openenv.mcp import ToolArgumentsError, tools_of
from tests.mcp.tool_envs import Point, ToolEnv


def test_schema_comes_from_type_hints_and_docstring() -> None:
    add = tools_of(ToolEnv)["add"]
    assert add.description == "Add two integers."
    assert add.input_schema() == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "a": {"type": "integer", "description": "The first addend."},
            "b": {"type": "integer", "default": 2, "description": "The second addend."},
        },
        "required": ["a"],
    }


def test_schema_keeps_constraints_literals_and_models() -> None:
    note = tools_of(ToolEnv)["note"].input_schema()
    assert note["properties"]["text"] == {"type": "string", "minLength": 1, "description": "What to write down."}
    assert note["properties"]["tag"]["enum"] == ["todo", "done"]
    norm = tools_of(ToolEnv)["norm"].input_schema()
    assert norm["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert norm["$defs"]["Point"]["required"] == ["x"]


def test_arguments_are_validated_and_coerced() -> None:
    add = tools_of(ToolEnv)["add"]
    assert add.validate({"a": "3"}) == {"a": 3, "b": 2}
    assert tools_of(ToolEnv)["norm"].validate({"p": {"x": 1}}) == {"p": Point(x=1, y=0)}
    with pytest.raises(ToolArgumentsError, match="a: Field required"):
        add.validate({"b": 1})
    with pytest.raises(ToolArgumentsError, match="unknown argument 'c'"):
        add.validate({"a": 1, "c": 2})
    with pytest.raises(ToolArgumentsError, match="valid integer"):
        add.validate({"a": "three"})
    with pytest.raises(ToolArgumentsError, match="must be an object"):
        add.validate([1, 2])


def test_tools_are_inherited_and_can_be_renamed() -> None:
    class Child(ToolEnv):
        @tool(name="sum2", description="Adds.", timeout_s=1.5)
        async def other(self, a: int) -> int:
            return a

        def boom(self, reason: str = "") -> None:  # redefined without @tool: no longer a tool
            return None

    specs = tools_of(Child)
    assert "add" in specs and "boom" not in specs
    assert specs["sum2"].description == "Adds." and specs["sum2"].timeout_s == 1.5 and specs["sum2"].is_async
    assert "boom" in tools_of(ToolEnv)  # the base class keeps its own


def test_a_tool_stays_a_plain_method() -> None:
    env = ToolEnv()
    assert env.add(1, b=5) == 6
    assert env.note("x")["count"] == 1


@pytest.mark.parametrize("bad", ["reset", "step", "state", "close"])
def test_reserved_names_are_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="may not be called"):

        @tool(name=bad)
        def f(self) -> None: ...


def test_bad_declarations_say_what_to_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"\*args"):

        @tool
        def star(self, *args: int) -> None: ...

    with pytest.raises(ConfigurationError, match="timeout_s must be > 0"):
        tool(timeout_s=0)

    with pytest.raises(ConfigurationError, match="must be 1-128"):

        @tool(name="has space")
        def spaced(self) -> None: ...

    class Twice(Environment):
        @tool(name="same")
        def one(self) -> None: ...

        @tool(name="same")
        def two(self) -> None: ...

    with pytest.raises(ConfigurationError, match="both declare tool 'same'"):
        tools_of(Twice)


def test_unresolvable_hints_are_reported_when_first_used() -> None:
    class Local(Environment):
        @tool
        def f(self, x: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    spec = tools_of(Local)["f"]
    with pytest.raises(ConfigurationError, match="cannot resolve the type hints of tool 'f'"):
        spec.input_schema()


def test_parameters_may_shadow_basemodel_names() -> None:
    class Shadow(Environment):
        @tool
        def f(self, schema: str, json: int = 0, model_config: bool = False) -> str:
            """:param schema: a name pydantic models use themselves"""
            return schema

    spec = tools_of(Shadow)["f"]
    assert set(spec.input_schema()["properties"]) == {"schema", "json", "model_config"}
    assert spec.input_schema()["properties"]["schema"]["description"] == "a name pydantic models use themselves"
    assert spec.validate({"schema": "s"}) == {"schema": "s", "json": 0, "model_config": False}


def test_env_without_tools_has_none() -> None:
    class Bare(Environment):
        pass

    assert tools_of(Bare) == {}
