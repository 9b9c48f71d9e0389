"""Finding the environments in a source folder or file by reading it (`ast`), never by importing or
running it: `openenv import` must not run code it has not been told to trust.

- **verifiers**: a module that imports `verifiers` (or one of its submodules) and defines
  `load_environment` (def or async def) at its top level; the candidate is `module:load_environment`.
- **ors** (Open Reward Standard): a top-level class deriving from ORS's `Environment`, imported from
  `ors`, `openreward` or `openrewardstandard` (or their `environment` / `environments` modules), by
  name (`from ors import Environment as E`) or through the module (`ors.Environment`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SKIPPED_DIRS", "SOURCE_KINDS", "Candidate", "Scan", "scan"]

SOURCE_KINDS = ("verifiers", "ors")
_ORS_ROOTS = ("ors", "openreward", "openrewardstandard")
_ORS_MODULES = frozenset(
    f"{root}{suffix}"
    for root in _ORS_ROOTS
    for suffix in ("", ".environment", ".environments", ".environments.environment")
)
# Folders that hold no source of the env itself (caches, virtual environments, builds).
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "build",
        "dist",
        "node_modules",
    }
)


@dataclass(frozen=True)
class Candidate:
    """An environment found in the source: its kind, module (dotted, relative to the source) and name."""

    kind: str
    module: str
    name: str
    path: Path

    @property
    def qualified_name(self) -> str:
        """`module:name`, what `--env-class` accepts besides the bare name."""
        return f"{self.module}:{self.name}"


@dataclass(frozen=True)
class Scan:
    """What reading a source found: its candidates, how many Python files were read, and those that
    did not parse (relative paths)."""

    candidates: list[Candidate]
    files_read: int
    unreadable: list[str]


def scan(source: Path) -> Scan:
    """Read every Python file of `source` (a folder, or one .py file) and list its candidates.

    Files that do not parse are listed in `Scan.unreadable`, not raised.
    """
    root = source if source.is_dir() else source.parent
    candidates: list[Candidate] = []
    unreadable: list[str] = []
    files = list(_python_files(source))
    for path in files:
        rel = path.relative_to(root)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            unreadable.append(rel.as_posix())
            continue
        module = ".".join(rel.with_suffix("").parts)
        module = module.removesuffix(".__init__") if module != "__init__" else ""
        candidates += [Candidate("verifiers", module, name, path) for name in _verifiers_entries(tree)]
        candidates += [Candidate("ors", module, name, path) for name in _ors_classes(tree)]
    return Scan(candidates, len(files), unreadable)


def _python_files(source: Path) -> Iterator[Path]:
    if source.is_file():
        yield source
        return
    for path in sorted(source.rglob("*.py")):
        if not SKIPPED_DIRS.intersection(path.relative_to(source).parts[:-1]):
            yield path


def _imports(tree: ast.Module) -> Iterator[tuple[str, str | None, str]]:
    """(module, imported name or None for `import module`, the local name) of every import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, alias.asname or alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.module, alias.name, alias.asname or alias.name


def _verifiers_entries(tree: ast.Module) -> list[str]:
    if not any(module == "verifiers" or module.startswith("verifiers.") for module, _, _ in _imports(tree)):
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "load_environment"
    ]


def _ors_classes(tree: ast.Module) -> list[str]:
    bases: set[str] = set()  # dotted names that mean ORS's Environment in this module
    for module, name, local in _imports(tree):
        if module not in _ORS_MODULES:
            continue
        if name == "Environment":
            bases.add(local)
        elif name is None:  # `import ors` / `import ors.environment as env`
            bound = module if local == module.split(".")[0] else local
            bases.add(f"{bound}.Environment")
        elif f"{module}.{name}" in _ORS_MODULES:  # `from ors import environment`
            bases.add(f"{local}.Environment")
    if not bases:
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(_dotted(base) in bases for base in node.bases)
    ]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):  # Environment[...]
        return _dotted(node.value)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""
