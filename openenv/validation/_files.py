"""Reading the files of an env folder: README front matter, Dockerfile, declared dependencies."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.dockerfile import DockerInstruction, dockerfile_instructions, find_dockerfile

__all__ = [
    "DockerInstruction",
    "FrontMatter",
    "declared_dependencies",
    "dockerfile_instructions",
    "find_dockerfile",
    "imported_modules",
    "local_module_names",
    "normalize_dist",
    "read_front_matter",
]

# Folders never scanned for code or shipped as part of an env.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        "build",
        "dist",
        ".openenv-sdk",
    }
)
_MAX_SCAN_FILES = 500


@dataclass(slots=True)
class FrontMatter:
    """A README's YAML front matter: `data` (None when absent or broken), where it failed, and
    whether there is no `---` block at all (`missing`, what `openenv push` writes itself)."""

    data: dict[str, Any] | None
    error: str | None = None
    line: int | None = None
    lines: dict[str, int] = field(default_factory=dict)
    missing: bool = False


def read_front_matter(text: str) -> FrontMatter:
    """Parse the `---` block at the top of a Space README.

    Returns:
        A FrontMatter; `data` is None and `error` says why when there is no usable block.
    """
    import yaml

    from openenv._yaml import YamlLimitError, load_limited

    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return FrontMatter(None, "README.md has no front matter (a '---' block at the very top)", 1, missing=True)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return FrontMatter(None, "the front matter block is not closed with '---'", 1)
    block = "\n".join(lines[1:end])
    try:
        data = load_limited(block) or {}
    except YamlLimitError as exc:
        return FrontMatter(None, f"the front matter is too large or too deep: {exc}", 2)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return FrontMatter(
            None, f"the front matter is not valid YAML: {getattr(exc, 'problem', exc)}", (mark.line + 2) if mark else 2
        )
    if not isinstance(data, dict):
        return FrontMatter(None, "the front matter must be a mapping of keys to values", 2)
    key_lines: dict[str, int] = {}
    for i in range(1, end):
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:", lines[i])
        if m:
            key_lines.setdefault(m.group(1), i + 1)
    return FrontMatter(data, lines=key_lines)


def normalize_dist(name: str) -> str:
    """PEP 503 normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _requirement_name(spec: str) -> str | None:
    spec = spec.strip()
    if not spec or spec.startswith(("#", "-", "/", ".")) or "://" in spec.split("@")[0]:
        return None
    m = _REQ_NAME.match(spec)
    return normalize_dist(m.group(1)) if m else None


def declared_dependencies(root: Path, dockerfile: Path | None = None) -> dict[str, str]:
    """Distributions the env declares, mapped to the file that declares them.

    Reads pyproject.toml ([project] dependencies and optional ones), requirements*.txt at the root
    and in server/, and `pip install` / `uv pip install` / `uv add` lines of the Dockerfile.
    """
    found: dict[str, str] = {}
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8", errors="replace")).get("project", {})
        except tomllib.TOMLDecodeError:
            project = {}
        specs = list(project.get("dependencies", []) or [])
        for extra in (project.get("optional-dependencies", {}) or {}).values():
            specs.extend(extra or [])
        for spec in specs:
            if isinstance(spec, str) and (name := _requirement_name(spec)):
                found.setdefault(name, "pyproject.toml")
    for folder in (root, root / "server"):
        for req in sorted(folder.glob("requirements*.txt")):
            for line in req.read_text(encoding="utf-8", errors="replace").splitlines():
                if name := _requirement_name(line.split("#")[0]):
                    found.setdefault(name, str(req.relative_to(root)))
    if dockerfile is not None and dockerfile.is_file():
        for ins in dockerfile_instructions(dockerfile.read_text(encoding="utf-8", errors="replace")):
            if ins.keyword != "RUN":
                continue
            for cmd in re.split(r"&&|;|\|\|", ins.args):
                for name in _pip_install_names(cmd.split()):
                    found.setdefault(name, str(dockerfile.relative_to(root)))
    return found


_FLAGS_WITH_VALUE = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--python",
        "-p",
        "--root",
        "--src",
    }
)


def _pip_install_names(words: list[str]) -> list[str]:
    """Distribution names in one shell command, if it is a pip/uv install."""
    if "install" in words and any(w in ("pip", "pip3", "uv") or w.endswith(("/pip", "/pip3")) for w in words):
        rest = words[words.index("install") + 1 :]
    elif words[:2] == ["uv", "add"]:
        rest = words[2:]
    else:
        return []
    names: list[str] = []
    skip_next = False
    for word in rest:
        word = word.strip("'\"")
        if skip_next:
            skip_next = False
            continue
        if word.startswith("-"):
            skip_next = word in _FLAGS_WITH_VALUE
            continue
        if word.startswith("$") or "/" in word or "\\" in word or word.endswith((".txt", ".whl", ".tar.gz", ".zip")):
            continue
        if name := _requirement_name(word):
            names.append(name)
    return names


def _python_files(root: Path) -> list[Path]:
    files: list[Path] = []
    stack = [root]
    while stack and len(files) < _MAX_SCAN_FILES:
        folder = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():
                if entry.name not in SKIP_DIRS and not entry.name.startswith(".") and entry.name != "tests":
                    stack.append(entry)
            elif entry.suffix == ".py" and not entry.name.startswith("test_") and entry.name != "conftest.py":
                files.append(entry)
    return files


def local_module_names(root: Path) -> set[str]:
    """Names an import could mean inside the env itself (its files, folders and own name)."""
    names = {root.name}
    for path in _python_files(root):
        names.add(path.stem)
        rel = path.relative_to(root)
        names.update(rel.parts[:-1])
    return names


def imported_modules(root: Path) -> dict[str, tuple[str, int]]:
    """Top-level names of the env's module-level absolute imports → (file, line) of the first one.

    What a module needs to import at all. Left out: imports inside functions (lazy, often
    optional), inside `try:` (code that handles ImportError has a fallback), and under
    `if TYPE_CHECKING:`.
    """
    found: dict[str, tuple[str, int]] = {}
    for path in _python_files(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
        except (SyntaxError, ValueError):
            continue
        for node in _module_level_imports(tree.body):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top and top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, (str(path.relative_to(root)), node.lineno))
    return found


def _module_level_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            out.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            out.extend(_module_level_imports(node.body))
            out.extend(_module_level_imports(node.orelse))
    return out
