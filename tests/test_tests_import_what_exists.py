"""Every name a test imports from the project exists, wherever the import sits.

mypy checks `openenv/` and `hub_service/` only, and pytest's collection sees only the imports at
the top of a test module: an import inside a test function of a name that was renamed fails only
when that test runs (in CI, a whole session later: a red run once came from a test importing a
private function renamed the turn before). This reads every test file's imports, in functions and
fixtures too, and checks each name against the module it is taken from."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("openenv", "hub_service")


def _imports(tests: Path) -> list[tuple[str, int, str, str]]:
    """(file, line, module, name) for each `from <project module> import name` under `tests`."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        if "fixtures" in path.parts or "upstream" in path.parts:
            continue  # env folders copied into tests, and programs run in upstream's venv (its `openenv`)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in PROJECT:
                continue
            rel = str(path.relative_to(tests.parent))
            found += [(rel, node.lineno, node.module, alias.name) for alias in node.names if alias.name != "*"]
    return found


def _missing(imports: list[tuple[str, int, str, str]]) -> list[str]:
    missing = []
    for rel, line, module, name in imports:
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{rel}:{line}: module {module} cannot be imported ({exc})")
            continue
        with warnings.catch_warnings():  # a deprecated alias (DockerProvider) exists, and warns when looked up
            warnings.simplefilter("ignore", DeprecationWarning)
            if hasattr(loaded, name):
                continue
        try:  # a submodule imported by name: `from openenv import engines`
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            missing.append(f"{rel}:{line}: {module} has no {name}")
    return missing


def test_every_project_name_a_test_imports_exists() -> None:
    imports = _imports(ROOT / "tests")
    assert len(imports) > 500  # the reader found the tests' imports
    missing = _missing(imports)
    assert not missing, "\n".join(missing)


def test_a_renamed_name_is_caught(tmp_path: Path) -> None:
    """The check itself: a test file importing, inside a function, a name the project lacks is named."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from openenv.engines.host import view\n\ndef test_x():\n    from openenv.engines.host import no_such_name\n",
        encoding="utf-8",
    )
    assert _missing(_imports(tmp_path / "tests")) == ["tests/test_x.py:4: openenv.engines.host has no no_such_name"]
