"""Following local `$ref`s in an action's JSON Schema, leniently: the website's forms and the
random baseline both read schemas that env authors wrote, and must never fail on one."""

from __future__ import annotations

from typing import Any

__all__ = ["deref"]


def deref(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$ref` chain (into `root`) followed; `{}` for what does not resolve.
    Sibling keys of a `$ref` win over the target's; a chain longer than 32 stops there."""
    for _ in range(32):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
            break
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema if isinstance(schema, dict) else {}
