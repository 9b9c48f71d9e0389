"""`ManifestProblem`, and turning YAML and pydantic errors of a manifest into them with their lines.

Below `openenv.manifest` (which re-exports `ManifestProblem` and `MANIFEST_FILE`), so neither needs the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = ["MANIFEST_FILE", "LineIndex", "ManifestProblem", "merge_by_field", "problem_from_pydantic"]

MANIFEST_FILE = "openenv.yaml"


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    """One thing wrong (or worth a warning) in a manifest.

    Attributes:
        code: a stable name of the rule: "syntax", "not_mapping", "duplicate_key", "invalid",
            "missing", "unsupported_version", "unknown_key", "no_spec_version", "too_large".
        field: the dotted path of the value ("port", "variables.LEVEL"), or "" for the file.
        message: what is wrong.
        line: 1-based line in the file, when known.
        hint: what to do about it.
    """

    code: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    hint: str = ""

    def format(self, source: str = MANIFEST_FILE) -> str:
        """`openenv.yaml:6: port: must be ... — hint` on one line."""
        where = f"{source}:{self.line}" if self.line else source
        what = f"{self.field}: {self.message}" if self.field else self.message
        return f"{where}: {what}" + (f" — {self.hint}" if self.hint else "")


def problem_from_pydantic(err: ErrorDetails, lines: LineIndex, hints: dict[str, str]) -> ManifestProblem:
    loc = _trim_union_loc(tuple(err.get("loc", ())))
    top = str(loc[0]) if loc else ""
    dotted = ".".join(str(p) for p in loc)
    kind = err.get("type", "")
    hint = hints.get(top, "")
    if kind == "missing":
        return ManifestProblem("missing", dotted, "is required but missing", line=1, hint=hint)
    value = err.get("input")
    message = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        message = f"{value!r} is not valid here"
    elif kind == "literal_error":
        message = f"{value!r} is not allowed; {message[0].lower()}{message[1:]}"
    else:
        message = message[0].lower() + message[1:]
    if isinstance(value, bool) and top not in ("spec_version", "port"):
        hint = "YAML reads yes/no/on/off/true/false as true/false: put the value in quotes"
    return ManifestProblem("invalid", dotted, message, line=lines.line(loc), hint=hint)


def merge_by_field(problems: list[ManifestProblem]) -> list[ManifestProblem]:
    # A union field (action: str | mapping) fails once per member; report it once.
    merged: dict[str, ManifestProblem] = {}
    for p in problems:
        if p.field in merged and p.code == "invalid":
            first = merged[p.field]
            merged[p.field] = ManifestProblem(
                first.code, first.field, f"{first.message}, or {p.message}", first.line, first.column, first.hint
            )
        else:
            merged.setdefault(p.field, p)
    return list(merged.values())


def _trim_union_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # Union members appear in pydantic's loc ("action", "str"); keep only the document path.
    out: list[Any] = []
    for part in loc:
        if isinstance(part, str) and (
            part.startswith(("function-", "union[", "dict[", "list[")) or part in ("str", "int")
        ):
            continue
        out.append(part)
    return tuple(out)


class LineIndex:
    """Lines of the values in a composed YAML document, and duplicate keys found on the way."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.duplicates: list[ManifestProblem] = []
        self._find_duplicates(root, ())

    def _find_duplicates(self, node: Any, path: tuple[Any, ...]) -> None:
        import yaml

        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is not None:
                    line = key_node.start_mark.line + 1
                    if key in seen:
                        dotted = ".".join(str(p) for p in (*path, key))
                        self.duplicates.append(
                            ManifestProblem(
                                "duplicate_key",
                                dotted,
                                f"is set twice (lines {seen[key]} and {line}); YAML keeps only the last",
                                line=line,
                                hint="remove one of them",
                            )
                        )
                    else:
                        seen[key] = line
                self._find_duplicates(value_node, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._find_duplicates(item, (*path, i))

    def line(self, loc: tuple[Any, ...]) -> int | None:
        """1-based line of the value at `loc`, or of its closest parent that exists."""
        import yaml

        node = self.root
        best = node.start_mark.line + 1 if node is not None else None
        for part in loc:
            nxt = None
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                        nxt = value_node
                        best = key_node.start_mark.line + 1
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                nxt = node.value[part]
                best = nxt.start_mark.line + 1
            if nxt is None:
                break
            node = nxt
        return best
