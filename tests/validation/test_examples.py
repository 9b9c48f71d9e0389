"""The schema-driven example generator: what it builds validates against the model it came from."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from openenv import Action
from openenv.validation import SchemaExampleError, example_from_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int = Field(ge=-5, le=5)
    y: float = Field(gt=0.5, lt=0.75)


class Tree(BaseModel):
    label: str
    children: list[Tree] = Field(default_factory=list)


class Everything(Action):
    text: Annotated[str, Field(min_length=3, max_length=5)]
    code: str = Field(pattern=r"^[A-Z]{2}-\d{3}$")
    mode: Literal["fast", "slow"]
    color: Color
    count: int = Field(multiple_of=5, gt=7)
    ratio: float = Field(ge=0.1, le=0.2)
    flag: bool
    when: dt.datetime
    ident: uuid.UUID
    point: Point
    points: list[Point] = Field(min_length=2, max_length=3)
    pair: tuple[int, str]
    maybe: int | None
    either: int | str
    tree: Tree
    mapping: dict[str, int]
    optional_with_default: int = 4


MODELS = [Everything, Point, Tree]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_examples_validate_against_their_model(model: type[BaseModel], variant: int) -> None:
    example = example_from_schema(model.model_json_schema(), variant=variant)
    model.model_validate(example)


def test_author_examples_and_defaults_win() -> None:
    class Move(Action):
        square: str = Field(examples=["e4", "d4"])
        promote: str = Field(default="queen")

    schema = Move.model_json_schema()
    assert example_from_schema(schema) == {"square": "e4"}
    assert example_from_schema(schema, variant=1) == {"square": "d4"}
    assert example_from_schema(schema["properties"]["promote"]) == "queen"


def test_only_required_fields_are_sent() -> None:
    example = example_from_schema(Everything.model_json_schema())
    assert "optional_with_default" not in example and "metadata" not in example
    assert set(example) == set(Everything.model_json_schema()["required"])


def test_a_ref_that_points_nowhere_is_an_error() -> None:
    with pytest.raises(SchemaExampleError, match="points nowhere"):
        example_from_schema({"$ref": "#/$defs/Missing"})
    with pytest.raises(SchemaExampleError, match="only local references"):
        example_from_schema({"$ref": "https://example.com/schema.json"})
