"""Action forms from an action's JSON Schema: one input per field, JSON for the complex ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hub_service.schema_refs import deref

__all__ = ["FieldSpec", "FormError", "collect", "field_specs", "form_values"]


class FormError(ValueError):
    """A form value cannot become part of the action; the message names the field."""


@dataclass
class FieldSpec:
    name: str
    kind: str  # string | integer | number | boolean | enum | const | json
    schema: dict[str, Any]
    required: bool
    nullable: bool = False
    choices: list[Any] = field(default_factory=list)

    @property
    def help(self) -> str:
        parts = [self.schema.get("description") or ""]
        lo, hi = self.schema.get("minimum"), self.schema.get("maximum")
        if lo is not None or hi is not None:
            parts.append(f"({'' if lo is None else lo}…{'' if hi is None else hi})")
        if self.kind == "json":
            parts.append("(JSON)")
        return " ".join(p for p in parts if p)

    def initial(self) -> Any:
        s = self.schema
        if s.get("default") is not None:
            value = s["default"]
        elif isinstance(s.get("examples"), list) and s["examples"]:
            value = s["examples"][0]
        elif self.kind in ("integer", "number"):
            value = s.get("minimum", 0)
        elif self.kind == "boolean":
            value = False
        elif self.kind == "json":
            value = {"array": []}.get(str(s.get("type")), {})
        else:
            value = ""
        if self.kind == "enum":
            return self.choices.index(value) if value in self.choices else 0
        if self.kind == "json":
            return json.dumps(value, indent=1)
        return value


def field_specs(schema: dict[str, Any]) -> list[FieldSpec]:
    """The form's fields, in the schema's order (`metadata` left out: it is for tooling)."""
    specs = []
    required = set(schema.get("required") or [])
    for name, raw in (schema.get("properties") or {}).items():
        if name == "metadata":
            continue
        s, nullable = deref(raw, schema), False
        alts = s.get("anyOf") or s.get("oneOf")
        if isinstance(alts, list):
            real = [deref(a, schema) for a in alts if deref(a, schema).get("type") != "null"]
            if len(real) == 1:
                s, nullable = (
                    {**real[0], **{k: v for k, v in s.items() if k in ("default", "description", "title")}},
                    True,
                )
        if isinstance(s.get("enum"), list) and s["enum"]:
            specs.append(FieldSpec(name, "enum", s, name in required, nullable, list(s["enum"])))
        elif "const" in s:
            specs.append(FieldSpec(name, "const", s, name in required, nullable))
        elif s.get("type") in ("string", "integer", "number", "boolean"):
            specs.append(FieldSpec(name, s["type"], s, name in required, nullable))
        else:
            specs.append(FieldSpec(name, "json", s, name in required, nullable))
    return specs


def collect(specs: list[FieldSpec], values: list[Any]) -> dict[str, Any]:
    """The action from the form's values (same order as `specs`).

    Raises:
        FormError: a JSON field does not parse, or a number field holds no number.
    """
    action: dict[str, Any] = {}
    for spec, value in zip(specs, values, strict=True):
        if spec.kind == "const":
            action[spec.name] = spec.schema["const"]
        elif spec.kind == "enum":
            index = int(value) if value is not None else 0
            action[spec.name] = spec.choices[index]
        elif spec.kind in ("integer", "number"):
            if value is None or value == "":
                if spec.required:
                    raise FormError(f"{spec.name}: enter a number")
                continue
            action[spec.name] = int(value) if spec.kind == "integer" else float(value)
        elif spec.kind == "boolean":
            action[spec.name] = bool(value)
        elif spec.kind == "string":
            if (value is None or value == "") and spec.nullable and not spec.required:
                continue
            action[spec.name] = value or ""
        else:
            try:
                action[spec.name] = json.loads(value) if isinstance(value, str) else value
            except ValueError as exc:
                raise FormError(f"{spec.name}: not valid JSON ({exc})") from None
    return action


def form_values(specs: list[FieldSpec], action: Any, current: list[Any]) -> list[Any]:
    """The form's values for `action` (the inverse of `collect`): a field the action leaves out
    keeps its current value.

    Raises:
        FormError: the action is no JSON object, names a field the form does not have, or holds a
            value its field cannot show (a choice not offered, text for a number); the message names it.
    """
    if not isinstance(action, dict):
        raise FormError("the action must be a JSON object")
    unknown = sorted(set(action) - {s.name for s in specs})
    if unknown:
        raise FormError(f"the form has no field for {', '.join(unknown)}: keep editing the action as JSON")
    values = list(current)
    for i, spec in enumerate(specs):
        if spec.name not in action:
            continue
        value = action[spec.name]
        if spec.kind == "const":
            if value != spec.schema["const"]:
                raise FormError(f"{spec.name}: it can only be {json.dumps(spec.schema['const'])}")
        elif spec.kind == "enum":
            if value not in spec.choices:
                raise FormError(f"{spec.name}: {json.dumps(value)} is not one of the choices")
            values[i] = spec.choices.index(value)
        elif spec.kind in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FormError(f"{spec.name}: {json.dumps(value)} is not a number")
            values[i] = value
        elif spec.kind == "boolean":
            if not isinstance(value, bool):
                raise FormError(f"{spec.name}: {json.dumps(value)} is not true or false")
            values[i] = value
        elif spec.kind == "string":
            if value is not None and not isinstance(value, str):
                raise FormError(f"{spec.name}: {json.dumps(value)} is not text")
            values[i] = value or ""
        else:
            values[i] = json.dumps(value, indent=1)
    return values
