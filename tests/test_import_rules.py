"""Imports point one way: the SDK (`openenv/`) never imports the Hub (`hub_service/`), and no two
modules or packages of either tree need each other.

Every module is read with `ast`, never imported, so the rules hold for code paths no test runs.
An import counts wherever it is written: at module level, inside a function (a deferred import is
still a dependency), through `importlib.import_module("literal")`, or as a lazy table entry (a
dict value naming one of our modules, e.g. `{"EnvClient": "openenv.client.base"}` or openenv.cli's
`COMMANDS`: a command table that named `hub_service.cli` would break rule (a) as an import would),
or under `if TYPE_CHECKING:` (it never runs, but a module that names another's class in its types
knows that module: two that do so of each other are one idea held apart, so a cycle through such an
import is a cycle; the lower one names what it needs as a `typing.Protocol` instead).

How a name resolves: `import a.b` and `from a import X` depend on `a/b.py` and `a/__init__.py`
respectively; `from a import b` where `a/b.py` exists depends on the submodule `a.b` (not on
`a/__init__.py`, whose re-exports would otherwise tie every package to its own children).

Module cycles (b) do not cover package cycles (c): `client.a → server.x` and `server.y → client.b`
is no module cycle, yet `openenv.client` and `openenv.server` need each other. So (c) is checked on
its own, at every level: the children of each package (a subpackage counted as one unit with
everything under it, the package's `__init__` as one more) must not form a cycle either.

Run this file as a script to print the graph's cycles without pytest.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("openenv", "hub_service")
# Data, not code: the Space template `openenv init` renders (its imports are the rendered env's).
EXCLUDED = (ROOT / "openenv" / "cli" / "_template",)
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Import:
    """One dependency of a module: the dotted name it refers to, and where it is written."""

    target: str
    line: int
    how: str  # "import", "from", "import_module" or "string"


@dataclass
class Graph:
    """Our modules (dotted name → file) and the dependencies between them."""

    files: dict[str, Path] = field(default_factory=dict)
    imports: dict[str, list[Import]] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _walk_files() -> Iterator[Path]:
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if not any(path.is_relative_to(excluded) for excluded in EXCLUDED):
                yield path


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.found: list[Import] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append(Import(alias.name, node.lineno, "import"))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = (
            _resolve_relative(self.module, self.is_package, node.level, node.module) if node.level else node.module
        ) or ""
        for alias in node.names:
            # Whether `alias.name` is a submodule or an attribute is settled against the file tree later.
            self.found.append(Import(f"{base}\0{alias.name}", node.lineno, "from"))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if isinstance(value, str):
                self.found.append(Import(value, node.lineno, "import_module"))
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for value in node.values:
            self._table_entries(value)
        self.generic_visit(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._table_entries(node.value)
        self.generic_visit(node)

    def _table_entries(self, value: ast.expr) -> None:
        # A lazy table maps names to modules: `{"EnvClient": "openenv.client.base"}` or `{"cmd": ("mod", "help")}`.
        # Kept only when the string names one of our modules below the top (resolved later): a bare "openenv" in
        # a dict is data (a label's value), and other dict values are data too.
        entries = value.elts if isinstance(value, ast.Tuple) else [value]
        for entry in entries:
            text = entry.value if isinstance(entry, ast.Constant) and isinstance(entry.value, str) else ""
            if "." in text and _MODULE_NAME.fullmatch(text) and text.split(".")[0] in TREES:
                self.found.append(Import(text, entry.lineno, "string"))


def collect(source: str, module: str, is_package: bool, modules: Iterable[str]) -> list[Import]:
    """The imports written in `source` (the module `module`), resolved against our `modules`."""
    known = set(modules)
    collector = _Collector(module, is_package)
    collector.visit(ast.parse(source))
    resolved: list[Import] = []
    for found in collector.found:
        if found.how == "from":
            base, attr = found.target.split("\0")
            submodule = f"{base}.{attr}" if base else attr
            resolved.append(Import(submodule if submodule in known else base, found.line, "from"))
        elif found.how != "string" or found.target in known:
            resolved.append(found)
    return resolved


def build_graph() -> Graph:
    graph = Graph()
    graph.files = {_module_name(path): path for path in _walk_files()}
    for name, path in graph.files.items():
        found = collect(path.read_text(encoding="utf-8"), name, _is_package(path), graph.files)
        graph.imports[name] = found
        graph.edges[name] = {i.target for i in found if i.target in graph.files and i.target != name}
    return graph


def _shortest_path(edges: dict[str, set[str]], start: str, goal: str, allowed: set[str]) -> list[str] | None:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (step := previous[path[-1]]) is not None:
                path.append(step)
            return path[::-1]
        for nxt in sorted(edges.get(node, ())):
            if nxt in allowed and nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    return None


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every edge that lies on a cycle, with the shortest cycle through it; each cycle listed once.

    Untangling every cycle listed removes them all: an edge on no listed cycle lies on no cycle.
    """
    cycles: dict[tuple[str, ...], list[str]] = {}
    for component in _strongly_connected(edges):
        if len(component) < 2:
            continue
        for source in sorted(component):
            for target in sorted(edges.get(source, set()) & component):
                back = _shortest_path(edges, target, source, component)
                assert back is not None  # same component: a way back exists
                cycle = [source, *back[:-1]]
                turn = cycle.index(min(cycle))
                cycle = cycle[turn:] + cycle[:turn]
                cycles.setdefault(tuple(cycle), cycle)
    return sorted(cycles.values(), key=lambda cycle: (len(cycle), cycle))


def package_edges(graph: Graph, package: str) -> dict[str, set[str]]:
    """The dependencies between the children of `package` (each subpackage one unit with all under it)."""

    def unit(module: str) -> str | None:
        if module == package:
            return f"{package} (__init__)"
        if not module.startswith(package + "."):
            return None
        return ".".join(module.split(".")[: package.count(".") + 2])

    edges: dict[str, set[str]] = {}
    for source, targets in graph.edges.items():
        source_unit = unit(source)
        if source_unit is None:
            continue
        edges.setdefault(source_unit, set())
        for target in targets:
            target_unit = unit(target)
            if target_unit is not None and target_unit != source_unit:
                edges[source_unit].add(target_unit)
    return edges


def packages(graph: Graph) -> list[str]:
    return sorted(name for name, path in graph.files.items() if _is_package(path))


def _in_unit(module: str, unit: str) -> bool:
    if unit.endswith(" (__init__)"):
        return module == unit.removesuffix(" (__init__)")
    return module == unit or module.startswith(unit + ".")


def _witness(graph: Graph, source_unit: str, target_unit: str) -> str:
    """One import that makes `source_unit` depend on `target_unit`, for the failure message."""
    for module, found in sorted(graph.imports.items()):
        if _in_unit(module, source_unit):
            for item in found:
                if item.target in graph.files and _in_unit(item.target, target_unit):
                    return f"{graph.files[module].relative_to(ROOT)}:{item.line} imports {item.target}"
    return "?"


def _describe(cycles: Iterable[list[str]]) -> str:
    return "\n".join("  " + " → ".join([*cycle, cycle[0]]) for cycle in cycles)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return build_graph()


def test_the_collector_sees_every_kind_of_import() -> None:
    # If it silently missed a kind of import, the rules below would pass vacuously.
    source = """
from typing import TYPE_CHECKING
import importlib
import openenv.a
from openenv import b, attr
from . import c
from ..d import e
importlib.import_module("openenv.f")
_LAZY = {"X": "openenv.g", "cmd": ("openenv.h", "help"), "label": "openenv", "other": "openenv.not_ours"}
def later():
    import openenv.i
if TYPE_CHECKING:
    import openenv.j
else:
    import openenv.k
"""
    ours = ["openenv", "openenv.a", "openenv.b", "openenv.pkg.c", "openenv.d", "openenv.g", "openenv.h"]
    found = {(i.target, i.how) for i in collect(source, "openenv.pkg.mod", False, ours)}
    assert found == {
        ("typing", "from"),
        ("importlib", "import"),
        ("openenv.a", "import"),
        ("openenv.b", "from"),  # a submodule named in `from pkg import`: the submodule
        ("openenv", "from"),  # an attribute: the package's __init__
        ("openenv.pkg.c", "from"),
        ("openenv.d", "from"),
        ("openenv.f", "import_module"),
        ("openenv.g", "string"),
        ("openenv.h", "string"),
        ("openenv.i", "import"),  # inside a function: still a dependency
        ("openenv.j", "import"),  # under TYPE_CHECKING: the module's types name it
        ("openenv.k", "import"),
    }, found
    in_package = {
        i.target for i in collect("from . import c\nfrom .. import x", "openenv.pkg", True, ["openenv.pkg.c"])
    }
    assert in_package == {"openenv.pkg.c", "openenv"}


def test_the_graph_covers_both_trees_but_not_the_template(graph: Graph) -> None:
    assert {name.split(".")[0] for name in graph.files} == set(TREES) and len(graph.files) > 150
    assert not any(name.startswith("openenv.cli._template") for name in graph.files)
    assert "openenv.types" in graph.edges["openenv"]  # the lazy table of the public API


def test_the_sdk_never_imports_the_hub(graph: Graph) -> None:
    offenders = [
        f"{graph.files[module].relative_to(ROOT)}:{item.line} ({item.how}) {item.target}"
        for module, found in sorted(graph.imports.items())
        if module.split(".")[0] == "openenv"
        for item in found
        if item.target.split(".")[0] == "hub_service"
    ]
    assert not offenders, (
        "openenv/ must not import hub_service (the SDK installs without the Hub; the Hub uses the SDK). "
        "Move the code into hub_service, or reach it through an entry point:\n  " + "\n  ".join(offenders)
    )


@pytest.mark.parametrize("tree", TREES)
def test_no_import_cycle_between_modules(graph: Graph, tree: str) -> None:
    edges = {module: targets for module, targets in graph.edges.items() if module.split(".")[0] == tree}
    cycles = find_cycles(edges)
    assert not cycles, (
        f"{len(cycles)} import cycle(s) in {tree}/ (each edge on a cycle shown once, in its shortest cycle); "
        "move what both sides need into a lower module, or pass it in:\n" + _describe(cycles)
    )


@pytest.mark.parametrize("tree", TREES)
def test_no_import_cycle_between_packages(graph: Graph, tree: str) -> None:
    problems: list[str] = []
    for package in packages(graph):
        if package.split(".")[0] != tree:
            continue
        edges = package_edges(graph, package)
        for cycle in find_cycles(edges):
            steps = [f"      {_witness(graph, a, b)}" for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True)]
            problems.append(f"  in {package}: " + " → ".join([*cycle, cycle[0]]) + "\n" + "\n".join(steps))
    assert not problems, f"packages of {tree}/ that need each other:\n" + "\n".join(problems)


def test_find_cycles_lists_every_cyclic_edge_in_a_shortest_cycle() -> None:
    edges = {"a": {"b"}, "b": {"a", "c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(edges) == [["a", "b"], ["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


if __name__ == "__main__":
    built = build_graph()
    for tree_name in TREES:
        found_cycles = find_cycles({m: t for m, t in built.edges.items() if m.split(".")[0] == tree_name})
        print(f"{tree_name}: {len(found_cycles)} module cycle(s)\n{_describe(found_cycles)}")
        for package_name in packages(built):
            if package_name.split(".")[0] == tree_name:
                for cycle in find_cycles(package_edges(built, package_name)):
                    print(f"  [{package_name}] " + " → ".join([*cycle, cycle[0]]))
