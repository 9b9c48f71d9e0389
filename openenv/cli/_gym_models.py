"""The source of an imported Gymnasium env's `models.py`: its spaces as pydantic fields, in the JSON
forms `openenv.interop.gymnasium` sends and reads.

An action is checked as the space bounds it (a Discrete's range, a Box's bounds when every element
shares them, lengths, a Text's lengths), so a client gets VALIDATION_ERROR for an action out of
the space; an observation is typed and shaped but not bounded (Gymnasium does not promise that
observations stay inside their space).
"""

from __future__ import annotations

import keyword
import re
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv.interop.gymnasium import is_image

__all__ = ["models_source", "space_text"]

_HEADER = '''"""{env_id} from Gymnasium {version}: what a client sends and gets back (written by `openenv import`)."""

from __future__ import annotations

from typing import {typing}

from pydantic import {pydantic}

from openenv import Action, Observation, State
'''

_TAIL = '''

class {prefix}Action(Action):
    """An action of {env_id}: {action_space}."""

    action: {action_annotation} = Field(description={action_description!r})


class {prefix}Observation(Observation):
    """What {env_id} shows after a reset or a step; reward and done as Gymnasium gives them (done:
    terminated or truncated)."""

    observation: {observation_annotation} = Field(description={observation_description!r})
    truncated: bool = Field(default=False, description="The episode was cut off (a time limit) rather than ended by the env.")
    info: dict[str, Any] = Field(default_factory=dict, description="Gymnasium's info dict, as JSON.")


class {prefix}State(State):
    """The episode's progress: the Gymnasium id, the reset's seed and the rewards so far."""

    env_id: str = ""
    seed: int | None = None
    total_reward: float = 0.0
'''

_MAX_DESCRIPTION = 400


def models_source(
    prefix: str,
    env_id: str,
    version: str,
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    action_meanings: list[str] | None = None,
) -> str:
    """models.py of the env whose spaces these are (`prefix` starts its class names)."""
    writer = _Writer(prefix)
    action = writer.annotation(action_space, strict=True, where="ActionValue")
    observation = writer.annotation(observation_space, strict=False, where="ObservationValue")
    action_description = _short(f"{action_space}")
    if action_meanings:
        action_description = _short(", ".join(f"{i} {m}" for i, m in enumerate(action_meanings)))
    observation_description = _short(
        f"{observation_space}, as a base64 PNG" if is_image(observation_space) else f"{observation_space}"
    )
    body = "".join(writer.classes) + _TAIL.format(
        prefix=prefix,
        env_id=env_id,
        action_space=_short(str(action_space)),
        action_annotation=action,
        action_description=action_description,
        observation_annotation=observation,
        observation_description=observation_description,
    )
    typing = ", ".join(n for n in ("Annotated", "Any") if n in body)
    pydantic = ", ".join(n for n in ("BaseModel", "ConfigDict", "Field") if n in body)
    return _HEADER.format(env_id=env_id, version=version, typing=typing, pydantic=pydantic) + body


def space_text(space: spaces.Space[Any]) -> str:
    """How Gymnasium writes the space, on one line (numpy pads its arrays with spaces)."""
    return _short(str(space))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1] + "…"


class _Writer:
    """Type expressions for spaces; a Dict space becomes a model class of its own (`classes`)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.classes: list[str] = []
        self._names = {f"{prefix}{role}" for role in ("Action", "Observation", "State")}

    def annotation(self, space: spaces.Space[Any], *, strict: bool, where: str) -> str:
        if isinstance(space, spaces.Discrete):
            low = int(space.start)
            return _bounded("int", low, low + int(space.n) - 1) if strict else "int"
        if isinstance(space, spaces.Text):
            bounds = f"Field(min_length={space.min_length}, max_length={space.max_length})"
            return f"Annotated[str, {bounds}]" if strict else "str"
        if isinstance(space, spaces.Dict):
            return self._model(space, strict=strict, where=where)
        if isinstance(space, spaces.Tuple):
            items = [self.annotation(s, strict=strict, where=f"{where}{i}") for i, s in enumerate(space.spaces)]
            return f"tuple[{', '.join(items) or '()'}]"
        if isinstance(space, spaces.Box):
            if not strict and is_image(space):
                return "str"
            return _nested(_box_element(space, strict), space.shape)
        if isinstance(space, spaces.MultiBinary):
            return _nested(_bounded("int", 0, 1) if strict else "int", space.shape)
        if isinstance(space, spaces.MultiDiscrete):
            element = "int"
            starts, ends = np.asarray(space.start), np.asarray(space.start) + np.asarray(space.nvec) - 1
            if strict and _uniform(starts) and _uniform(ends):
                element = _bounded("int", int(starts.flat[0]), int(ends.flat[0]))
            return _nested(element, space.shape)
        raise TypeError(f"no annotation for {space!r}; openenv.interop.gymnasium.check_space refuses it")

    def _model(self, space: spaces.Dict, *, strict: bool, where: str) -> str:
        name = self._class_name(where)
        lines = [f"\n\nclass {name}(BaseModel):", f'    """{_short(str(space))}"""', ""]
        extra = "forbid" if strict else "ignore"
        lines.append(f'    model_config = ConfigDict(extra="{extra}", populate_by_name=True)')
        lines.append("")
        taken: set[str] = set()
        for i, (key, sub) in enumerate(space.spaces.items()):
            part = _camel(str(key)) or f"Item{i}"
            annotation = self.annotation(sub, strict=strict, where=f"{where}{part}")
            field = str(key)
            if _plain_field(field) and field not in taken:
                lines.append(f"    {field}: {annotation}")
            else:
                field = re.sub(r"\W+", "_", field).strip("_").lower()
                field = field if _plain_field(field) and field not in taken else f"field_{i}"
                lines.append(f"    {field}: {annotation} = Field(alias={str(key)!r})")
            taken.add(field)
        self.classes.append("\n".join(lines) + "\n")
        return name

    def _class_name(self, where: str) -> str:
        name, n = f"{self.prefix}{where}", 2
        while name in self._names:
            name, n = f"{self.prefix}{where}{n}", n + 1
        self._names.add(name)
        return name


def _bounded(kind: str, low: Any, high: Any) -> str:
    parts = [f"ge={low!r}" if low is not None else "", f"le={high!r}" if high is not None else ""]
    args = ", ".join(p for p in parts if p)
    return f"Annotated[{kind}, Field({args})]" if args else kind


def _box_element(space: spaces.Box, strict: bool) -> str:
    kind = {"b": "bool", "i": "int", "u": "int"}.get(space.dtype.kind, "float")
    if not strict or kind == "bool":
        return kind
    cast = int if kind == "int" else float
    low = cast(space.low.flat[0]) if _uniform(space.low) and np.isfinite(space.low.flat[0]) else None
    high = cast(space.high.flat[0]) if _uniform(space.high) and np.isfinite(space.high.flat[0]) else None
    return _bounded(kind, low, high)


def _nested(element: str, shape: tuple[int, ...]) -> str:
    annotation = element
    for n in reversed(shape):
        annotation = f"Annotated[list[{annotation}], Field(min_length={n}, max_length={n})]"
    return annotation


def _uniform(values: Any) -> bool:
    array = np.asarray(values)
    return bool(array.size) and bool(np.all(array == array.flat[0]))


def _plain_field(key: str) -> bool:
    return key.isidentifier() and not keyword.iskeyword(key) and not key.startswith(("_", "model_"))


def _camel(key: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", key) if part)
