"""Write docs/api/*.md, the reference of the public API, from the docstrings of `openenv.__all__`.

    bash scripts/gen-api-docs            # rewrite the pages
    bash scripts/gen-api-docs --check    # exit 1 (and say which) when a committed page is stale

One page per area (models, environments, clients, tools, rubrics, errors), grouped by the module
each name is defined in, plus an index. Classes list their public methods and properties
(their own and those of OpenEnv base classes), models and dataclasses their fields. Google-style
docstring sections become lists; examples inside docstrings are fragments and stay plain text
(the runnable examples are in the guides, which the docs tests execute). The output depends
only on the code: no addresses, no dates.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "api"

# (page, title, intro, module prefixes) in the index's order; a name goes to the first that matches.
PAGES = [
    (
        "models",
        "Models",
        "What travels on the wire: actions, observations, state, and the results clients get.",
        ("openenv.types",),
    ),
    (
        "environments",
        "Environments and servers",
        "Writing an environment and serving it.",
        ("openenv.env", "openenv.server"),
    ),
    ("clients", "Clients", "Driving a server: async, blocking, or with plain dicts.", ("openenv.client",)),
    (
        "tools",
        "MCP tools",
        "Exposing environment methods as MCP tools, and the actions and observations that call them.",
        ("openenv.mcp",),
    ),
    ("rubrics", "Rubrics", "Composable reward functions.", ("openenv.rubrics",)),
    ("errors", "Errors", "Everything the SDK raises on purpose derives from `OpenEnvError`.", ("openenv.errors",)),
]
_SECTIONS = ("Args", "Arguments", "Returns", "Raises", "Yields", "Attributes", "Class attributes")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _module_of(obj: Any) -> str:
    return str(getattr(obj, "__module__", "") or "")


def _page_of(obj: Any) -> str:
    module = _module_of(obj)
    for page, _, _, prefixes in PAGES:
        if module.startswith(prefixes):
            return page
    raise SystemExit(f"gen-api-docs: {obj!r} ({module}) fits no page; add its module to PAGES")


def _summary(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _signature(obj: Any, *, drop_first: bool = False) -> str:
    """`(a: int, *, b: str = 'x') -> T`, with annotations as written (they are strings here)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    if drop_first and params and params[0].name in ("self", "cls"):
        params = params[1:]
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = {p.VAR_POSITIONAL: f"*{p.name}", p.VAR_KEYWORD: f"**{p.name}"}.get(p.kind, p.name)
        star_done = star_done or p.kind is p.VAR_POSITIONAL
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {_ADDRESS.sub('', repr(p.default))}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty and sig.return_annotation not in (None, "None"):
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _annotation(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else _type_name(annotation)


def _docstring(obj: Any) -> list[str]:
    """The docstring as Markdown lines: paragraphs, sections as lists, indented examples as text blocks."""
    doc = inspect.getdoc(obj)
    if not doc:
        return []
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        header = line.rstrip(":").strip()
        if line.endswith(":") and not line.startswith(" ") and header in _SECTIONS:
            i += 1
            items: list[str] = []
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
                text = lines[i].strip()
                if (
                    text
                    and lines[i].startswith("    ")
                    and not lines[i].startswith("        ")
                    and (m := re.match(r"^([\w*.`\"' ,|\[\]]+?):\s*(.*)$", text))
                ):
                    items.append(f"- `{m.group(1).strip('`')}`: {m.group(2)}")
                elif text and items:
                    items[-1] += " " + text
                elif text:
                    items.append(f"- {text}")
                i += 1
            out += ["", f"**{header}:**", "", *items, ""]
            continue
        if line.startswith("    "):
            block: list[str] = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *block, "```", ""]
            continue
        out.append(line)
        i += 1
    return _squeeze(out)


def _squeeze(lines: list[str]) -> list[str]:
    """No leading/trailing blank lines and never two in a row."""
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    return out


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    text = str(annotation).replace("typing.", "")
    return re.sub(r"\b(?:[a-z_]+\.)+([A-Z]\w*)", r"\1", text)


def _fields(obj: Any) -> list[str]:
    """A table of a pydantic model's or a dataclass's fields (those it adds to its OpenEnv bases)."""
    rows: list[tuple[str, str, str, str]] = []
    if hasattr(obj, "model_fields"):
        inherited = {
            n
            for base in obj.__mro__[1:]
            if hasattr(base, "model_fields") and _module_of(base).startswith("openenv")
            for n in base.model_fields
        }
        for name, info in obj.model_fields.items():
            if name in inherited and obj.__name__ not in ("Action", "Observation", "State"):
                continue
            default = "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
            rows.append((name, _type_name(info.annotation), default, _cell(info.description or "")))
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            if f.name.startswith("_"):
                continue
            if f.default is not dataclasses.MISSING:
                default = repr(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = repr(f.default_factory())
            else:
                default = "required"
            rows.append((f.name, _type_name(f.type), default, ""))
    if not rows:
        return []
    table = ["| field | type | default | |", "|---|---|---|---|"]
    table += [f"| `{n}` | `{_cell(t)}` | `{_cell(_ADDRESS.sub('', d))}` | {desc} |" for n, t, d, desc in rows]
    return ["", *table, ""]


def _documented_base(cls: type, exported: dict[type, str]) -> type | None:
    """The nearest base of `cls` that has an entry of its own (its members are listed there)."""
    return next((b for b in cls.__mro__[1:] if b in exported), None)


def _members(cls: type, exported: dict[type, str]) -> Iterator[tuple[str, Any, str]]:
    """(name, member, kind) of the public methods and properties of `cls` and its OpenEnv bases,
    up to the nearest base with an entry of its own."""
    seen: set[str] = set()
    stop = _documented_base(cls, exported)
    for base in cls.__mro__:
        if base is stop:
            break
        if not _module_of(base).startswith("openenv"):
            continue
        for name, member in base.__dict__.items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(member, property):
                kind = "property"
            elif isinstance(member, classmethod):
                kind, member = "classmethod", member.__func__
            elif isinstance(member, staticmethod):
                kind, member = "staticmethod", member.__func__
            elif inspect.isfunction(member):
                kind = "async method" if inspect.iscoroutinefunction(member) else "method"
            else:
                continue
            seen.add(name)
            yield name, member, kind


def _entry(name: str, obj: Any, exported: dict[type, str]) -> list[str]:
    lines = [f"## `{name}`", ""]
    if isinstance(obj, type):
        bases = [b.__name__ for b in obj.__bases__ if b is not object]
        is_model = hasattr(obj, "model_fields") or dataclasses.is_dataclass(obj)
        kind = "enum" if issubclass(obj, enum.Enum) else "model" if hasattr(obj, "model_fields") else "class"
        head = f"{kind} `{name}" + (f"({', '.join(bases)})`" if bases else "`")
        if not is_model and not issubclass(obj, (enum.Enum, BaseException)):
            head = f"{kind} `{name}{_signature(obj)}`" + (
                f", a subclass of {', '.join(f'`{b}`' for b in bases)}" if bases else ""
            )
        lines += [head, "", *_docstring(obj)]
        if issubclass(obj, enum.Enum):
            lines += ["", "Members: " + ", ".join(f"`{m.name}` (`{m.value!r}`)" for m in obj), ""]
        lines += _fields(obj)
        if not issubclass(obj, BaseException):
            if (base := _documented_base(obj, exported)) is not None and not issubclass(base, enum.Enum):
                lines += [
                    "",
                    f"It also has the methods and properties of [`{base.__name__}`]({exported[base]}#{base.__name__.lower()}).",
                    "",
                ]
            for member_name, member, kind in sorted(_members(obj, exported), key=lambda m: m[0]):
                target = member.fget if isinstance(member, property) else member
                sig = "" if kind == "property" else _signature(target, drop_first=kind != "staticmethod")
                lines += [
                    "",
                    f"### `{name}.{member_name}{sig}`",
                    "",
                    f"*{kind}*"
                    + (
                        f" — {_summary(target)}"
                        if not inspect.getdoc(target) or "\n" not in (inspect.getdoc(target) or "")
                        else ""
                    ),
                    "",
                ]
                doc = _docstring(target)
                if doc and "\n" in (inspect.getdoc(target) or ""):
                    lines += doc
    else:
        prefix = "async function" if inspect.iscoroutinefunction(obj) else "function"
        lines += [f"{prefix} `{name}{_signature(obj)}`", "", *_docstring(obj)]
    return [*_squeeze(lines), ""]


def render() -> dict[str, str]:
    """Every page's path (relative to docs/api) → its Markdown."""
    sys.path.insert(0, str(ROOT))
    import openenv

    grouped: dict[str, list[tuple[str, Any]]] = {page: [] for page, *_ in PAGES}
    exported: dict[type, str] = {}
    for name in openenv.__all__:
        obj = getattr(openenv, name)
        grouped[_page_of(obj)].append((name, obj))
        if isinstance(obj, type):
            exported[obj] = f"{_page_of(obj)}.md"
    pages: dict[str, str] = {}
    note = "<!-- Generated by scripts/gen-api-docs from the docstrings; edit those, then run it. -->"
    index = [
        note,
        "",
        "# API reference",
        "",
        "Everything `openenv` exports (`from openenv import ...`), from the docstrings. Guides with runnable examples: "
        "the [tutorial](../tutorial.md), [providers](../providers.md), [MCP tools](../mcp.md), [rubrics](../rubrics.md).",
        "",
    ]
    for page, title, intro, _ in PAGES:
        entries = grouped[page]
        if not entries:
            continue
        index += [f"## [{title}]({page}.md)", "", intro, "", "| name | what |", "|---|---|"]
        index += [f"| [`{n}`]({page}.md#{n.lower()}) | {_cell(_summary(o))} |" for n, o in entries]
        index.append("")
        body = [
            note,
            "",
            f"# {title}",
            "",
            intro,
            "",
            "[API reference](index.md) · "
            + " · ".join(f"[{t}]({p}.md)" for p, t, *_ in PAGES if p != page and grouped[p]),
            "",
        ]
        for name, obj in entries:
            body += _entry(name, obj, exported)
        pages[f"{page}.md"] = "\n".join(_squeeze(body)) + "\n"
    pages["index.md"] = "\n".join(_squeeze(index)) + "\n"
    return pages


def stale() -> list[str]:
    """Pages whose committed text differs from what `render()` gives (or that should not exist)."""
    wanted = render()
    found = {p.name for p in OUT.glob("*.md")} if OUT.is_dir() else set()
    out = [name for name, text in wanted.items() if not (OUT / name).is_file() or (OUT / name).read_text() != text]
    return sorted(out + [name for name in found - set(wanted)])


def main(argv: list[str]) -> int:
    if "--check" in argv:
        bad = stale()
        if bad:
            print(f"docs/api is out of date ({', '.join(bad)}): run `bash scripts/gen-api-docs`", file=sys.stderr)
            return 1
        print("docs/api is up to date")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    pages = render()
    for old in OUT.glob("*.md"):
        if old.name not in pages:
            old.unlink()
    for name, text in pages.items():
        (OUT / name).write_text(text)
    print(f"wrote {len(pages)} pages to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
