"""Make a value that satisfies a JSON Schema: how validators and smoke tests build actions.

`example_from_schema(schema)` prefers what the author wrote (`examples`, `default`, `const`,
`enum`), then builds the smallest value that meets the constraints: required properties only,
`minItems` items, numbers inside their bounds, strings of a valid length and format. `variant`
walks through alternatives (other examples, enum members, union branches) for a second try.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

__all__ = ["SchemaExampleError", "example_from_schema"]

_MAX_DEPTH = 24


class SchemaExampleError(ValueError):
    """No example could be built (an unresolvable $ref, or contradictory constraints)."""


def example_from_schema(schema: dict[str, Any], *, variant: int = 0) -> Any:
    """A value valid against `schema` (pydantic's `model_json_schema()` output and similar).

    Args:
        schema: a JSON Schema object; local `$ref`s (`#/$defs/...`, `#/definitions/...`) are resolved.
        variant: 0 for the most typical value; higher numbers pick other examples/branches.

    Raises:
        SchemaExampleError: a `$ref` points outside the schema, or the schema nests too deeply.
    """
    return _Generator(schema, variant).value(schema, 0)


class _Generator:
    def __init__(self, root: dict[str, Any], variant: int) -> None:
        self.root = root
        self.variant = variant

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise SchemaExampleError(f"cannot follow $ref {ref!r}: only local references are supported")
            target: Any = self.root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise SchemaExampleError(f"$ref {ref!r} points nowhere")
                target = target[part]
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **extra}
            seen += 1
            if seen > _MAX_DEPTH:
                raise SchemaExampleError(f"$ref {ref!r} loops")
        return schema

    def pick(self, options: list[Any]) -> Any:
        return options[self.variant % len(options)]

    def value(self, schema: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise SchemaExampleError("the schema nests too deeply to build an example")
        if schema is True or schema == {}:
            return "example"
        if not isinstance(schema, dict):
            return None
        schema = self.resolve(schema)
        for key in ("examples", "enum"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return self.pick(options)
        if "const" in schema:
            return schema["const"]
        if "default" in schema and self.variant == 0:
            return schema["default"]
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                part = self.resolve(part)
                for k, v in part.items():
                    if k in ("properties",) and k in merged:
                        merged[k] = {**merged[k], **v}
                    elif k == "required" and k in merged:
                        merged[k] = [*merged[k], *v]
                    else:
                        merged[k] = v
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.value({**merged, **rest}, depth + 1)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                usable = [b for b in branches if self.resolve(b).get("type") != "null"] or branches
                branch = self.pick(usable)
                value = self.value(branch, depth + 1)
                return self._tagged(schema, branch, value)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or kind
            kind = self.pick(kinds)
        if kind is None:
            kind = "object" if "properties" in schema else ("array" if "items" in schema else "string")
        maker = getattr(self, f"_{kind}", None)
        if maker is None:
            return None
        return maker(schema, depth)

    def _tagged(self, union: dict[str, Any], branch: Any, value: Any) -> Any:
        """`value` (built from `branch`) with the union's discriminator tag set: a server needs the tag to
        pick the branch, even where the branch's own schema gives it a default and leaves it optional."""
        discriminator = union.get("discriminator")
        if not isinstance(discriminator, dict) or not isinstance(value, dict):
            return value
        name = discriminator.get("propertyName")
        if not isinstance(name, str):
            return value
        mapping = discriminator.get("mapping")
        if isinstance(mapping, dict) and isinstance(branch, dict) and "$ref" in branch:
            for tag, ref in mapping.items():
                if ref == branch["$ref"]:
                    return {**value, name: tag}
        prop = (self.resolve(branch).get("properties") or {}).get(name) if isinstance(branch, dict) else None
        tag = _fixed_value(self.resolve(prop)) if isinstance(prop, dict) else _NO_VALUE
        return value if tag is _NO_VALUE else {**value, name: tag}

    def _null(self, schema: dict[str, Any], depth: int) -> None:
        return None

    def _boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return bool(self.variant % 2)

    def _integer(self, schema: dict[str, Any], depth: int) -> int:
        low = schema.get("minimum")
        if "exclusiveMinimum" in schema:
            low = int(schema["exclusiveMinimum"]) + 1
        high = schema.get("maximum")
        if "exclusiveMaximum" in schema:
            high = int(schema["exclusiveMaximum"]) - 1
        if low is not None and high is not None and int(high) >= int(low):
            value = int(low) + self.variant % (int(high) - int(low) + 1)
        else:
            value = (
                int(low) + self.variant
                if low is not None
                else (min(0, int(high)) if high is not None else self.variant)
            )
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0 and value % step:
            value += step - value % step
        return value

    def _number(self, schema: dict[str, Any], depth: int) -> float:
        low = schema.get("minimum")
        if "exclusiveMinimum" in schema:
            low = float(schema["exclusiveMinimum"]) + (abs(float(schema["exclusiveMinimum"])) * 1e-6 or 1e-6)
        high = schema.get("maximum")
        if "exclusiveMaximum" in schema:
            high = float(schema["exclusiveMaximum"]) - (abs(float(schema["exclusiveMaximum"])) * 1e-6 or 1e-6)
        if low is not None and high is not None:
            return (float(low) + float(high)) / 2
        if low is not None:
            return float(low)
        if high is not None:
            return min(0.0, float(high))
        return 0.5 * self.variant

    def _string(self, schema: dict[str, Any], depth: int) -> str:
        fmt = schema.get("format")
        by_format = {
            "date-time": _dt.datetime(2024, 1, 1, tzinfo=_dt.UTC).isoformat(),
            "date": "2024-01-01",
            "time": "12:00:00",
            "email": "user@example.com",
            "uri": "https://example.com/",
            "url": "https://example.com/",
            "uuid": "00000000-0000-4000-8000-000000000000",
            "ipv4": "127.0.0.1",
            "binary": "",
        }
        if fmt in by_format:
            return by_format[fmt]
        low = int(schema.get("minLength", 0))
        high = schema.get("maxLength")
        text = "hello" if self.variant == 0 else f"example {self.variant}"
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            text = _match_simple_pattern(pattern) or text
        if len(text) < low:
            text = text + "x" * (low - len(text))
        if high is not None and len(text) > int(high):
            text = text[: int(high)]
        return text

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        count = max(int(schema.get("minItems", 0)), len(prefix))
        if count == 0 and self.variant:
            count = 1
        out = [
            self.value(prefix[i], depth + 1) if i < len(prefix) else self.value(items, depth + 1) for i in range(count)
        ]
        if schema.get("uniqueItems") and len(out) > 1 and all(isinstance(v, int) for v in out):
            out = [out[0] + i for i in range(len(out))]
        return out

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        out: dict[str, Any] = {}
        for name in required:
            sub = props.get(name, {})
            out[name] = self.value(sub, depth + 1)
        for name, sub in props.items():
            # A tag (a property with one possible value, `Literal["move"] = "move"`): optional in the
            # schema because it has a default, but what tells a union's branches apart. Always sent.
            if name not in out and isinstance(sub, dict):
                tag = _fixed_value(self.resolve(sub))
                if tag is not _NO_VALUE:
                    out[name] = tag
        min_props = int(schema.get("minProperties", 0))
        for name, sub in props.items():
            if len(out) >= min_props:
                break
            out.setdefault(name, self.value(sub, depth + 1))
        return out


_NO_VALUE: Any = object()


def _fixed_value(schema: dict[str, Any]) -> Any:
    """The one value `schema` allows (`const`, or an enum of one), or _NO_VALUE."""
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        return enum[0]
    return _NO_VALUE


def _match_simple_pattern(pattern: str) -> str | None:
    """A string matching a regular expression made of literals, escapes, classes, groups and
    quantifiers (the patterns schemas use); None when the sketch does not match."""
    body = pattern.removeprefix("^").removesuffix("$")
    try:
        candidate, _ = _sketch(body, 0)
    except (IndexError, ValueError):
        return None
    try:
        return candidate if re.search(pattern, candidate) else None
    except re.error:
        return None


_ESCAPES = {"d": "0", "w": "a", "s": " ", "D": "a", "W": "-", "S": "a"}


def _sketch(body: str, i: int, stop: str = "") -> tuple[str, int]:
    out: list[str] = []
    while i < len(body) and body[i] not in stop:
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            piece, i = _ESCAPES.get(nxt, nxt), i + 2
        elif ch == "[":
            end = body.index("]", i + 2 if body[i + 1] == "]" else i + 1)
            piece, i = _class_sample(body[i + 1 : end]), end + 1
        elif ch == "(":
            j = i + 1
            if body.startswith("?:", j):
                j += 2
            piece, j = _sketch(body, j, stop="|)")
            depth = 0
            while body[j] != ")" or depth:  # skip the other alternatives
                depth += {"(": 1, ")": -1}.get(body[j], 0)
                j += 1
            i = j + 1
        elif ch in "^$":
            piece, i = "", i + 1
        elif ch == ".":
            piece, i = "a", i + 1
        else:
            piece, i = ch, i + 1
        count = 1
        m = re.match(r"\{(\d+)(?:,(\d*))?\}|\+|\*|\?", body[i:])
        if m:
            token = m.group(0)
            count = int(m.group(1)) if m.group(1) else (1 if token == "+" else 0)
            i += len(token)
            if i < len(body) and body[i] in "?+":  # lazy / possessive marks
                i += 1
        out.append(piece * count)
    if stop and i < len(body) and body[i] == "|":
        return "".join(out), i
    return "".join(out), i


def _class_sample(spec: str) -> str:
    negated = spec.startswith("^")
    spec = spec[1:] if negated else spec
    if negated:
        for cand in "aA0_-x ":
            if not re.fullmatch(f"[{spec}]", cand):
                return cand
        raise ValueError("no sample for a negated class")
    if spec.startswith("\\"):
        return _ESCAPES.get(spec[1], spec[1])
    return spec[0]
