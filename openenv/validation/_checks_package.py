"""Static checks that the env folder is also a Python package (package.*).

A user installs an env's typed client straight from its Space (`pip install git+<Space URL>`),
so the folder's pyproject.toml must build a package named like the env, holding its models and a
typed client, with the server's dependencies kept in an extra. Spaces made before this
convention have no such pyproject: every check here is a warning, never a failure.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from openenv.validation import _files
from openenv.validation._context import FolderContext
from openenv.validation.registry import Finding, ok, problem, register, skipped

__all__: list[str] = []

_PYPROJECT = "pyproject.toml"
_SDK_DISTS = ("openenv-hub", "openenv-core", "openenv")
# Upstream's SDK: one distribution for client and server alike (`openenv[core]` is an old extra of it).
_UPSTREAM_SDK_DISTS = ("openenv-core", "openenv")
# The client bases a typed client subclasses: ours and upstream's (EnvClient[A, O, S]), upstream's
# MCP tool client (no type parameters), and openenv-core 0.1's HTTPEnvClient[A, O].
_GENERIC_CLIENTS = frozenset({"EnvClient", "HTTPEnvClient"})
_PLAIN_CLIENTS = frozenset({"MCPToolClient"})
_SDK_MODULES = ("openenv", "openenv_core")
# What only a server needs: a client install must not pull these in.
_SERVER_ONLY = frozenset({"fastapi", "uvicorn", "starlette", "gradio"})
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def _parse(spec: str) -> tuple[str, set[str]] | None:
    """(normalized distribution name, extras) of a requirement specifier, None if unreadable."""
    m = _REQ.match(spec)
    if not m:
        return None
    extras = {e.strip().lower() for e in (m.group(2) or "[]")[1:-1].split(",") if e.strip()}
    return _files.normalize_dist(m.group(1)), extras


def _need_project(ctx: FolderContext) -> Finding | None:
    """A skip when there is no readable [project] table (package.pyproject says why)."""
    project = ctx.pyproject.get("project") if ctx.pyproject else None
    if not isinstance(project, dict):
        return skipped("no readable [project] table in pyproject.toml (see package.pyproject)")
    return None


def _name(ctx: FolderContext) -> str:
    return ctx.manifest.name if ctx.manifest is not None else ctx.root.name


@register(
    "package.pyproject",
    "pyproject.toml builds a package named like the env",
    severity="warning",
    stage="static",
    remediation="add a pyproject.toml as `openenv init` makes one: [project] name = the env's name, and a [build-system]",
)
def _package_pyproject(ctx: FolderContext) -> Iterator[Finding]:
    if not (ctx.root / _PYPROJECT).is_file():
        yield problem(
            "no pyproject.toml: the env's client cannot be installed with pip (Spaces made before this convention lack one)"
        )
        return
    if ctx.pyproject is None:
        yield problem(
            f"pyproject.toml is not valid TOML: {ctx.pyproject_error}",
            file=_PYPROJECT,
            remediation="fix the TOML syntax",
            line=ctx.pyproject_error_line,
        )
        return
    project = ctx.pyproject.get("project")
    name = _name(ctx)
    found = 0
    if not isinstance(project, dict) or not project.get("name"):
        found += 1
        yield problem("pyproject.toml has no [project] table with a name", file=_PYPROJECT)
    elif not _names_the_env(str(project["name"]), name):
        found += 1
        yield problem(
            f"the package is named {project['name']!r}, not the env's name {name!r}",
            file=_PYPROJECT,
            line=_line_of(ctx, r"^\s*name\s*="),
            remediation=f'set name = "{name}" under [project]',
        )
    build = ctx.pyproject.get("build-system")
    if not isinstance(build, dict) or not build.get("build-backend"):
        found += 1
        yield problem(
            "pyproject.toml has no [build-system] with a build-backend, so pip cannot tell how to build it",
            file=_PYPROJECT,
            remediation='add [build-system] requires = ["hatchling>=1.25"], build-backend = "hatchling.build"',
        )
    if not found:
        assert isinstance(project, dict) and isinstance(build, dict)
        yield ok(f"package {project['name']!r} (built with {build['build-backend']})", file=_PYPROJECT)


@register(
    "package.layout",
    "The folder installs as the package `<name>`",
    severity="warning",
    stage="static",
    remediation='map the folder to the package: [tool.hatch.build.targets.wheel.sources] "" = "<name>" '
    '(or setuptools package-dir = {"<name>" = "."}), with __init__.py at the root',
)
def _package_layout(ctx: FolderContext) -> Finding:
    if ctx.pyproject is None:
        return skipped("no readable pyproject.toml (see package.pyproject)")
    name = _name(ctx)
    if not name.isidentifier():
        return problem(
            f"the env's name {name!r} is not a Python identifier, so `import {name}` cannot work",
            remediation="rename the env to lowercase letters, digits and '_' (e.g. my_env)",
            file="openenv.yaml",
        )
    if not (ctx.root / "__init__.py").is_file():
        return problem(
            "no __init__.py at the folder's root: the folder is not a package",
            remediation="add __init__.py exporting the client and models (see `openenv init`)",
        )
    tool = ctx.pyproject.get("tool") or {}
    backend = str((ctx.pyproject.get("build-system") or {}).get("build-backend") or "")
    hatch_sources = _dig(tool, "hatch", "build", "targets", "wheel", "sources") or _dig(
        tool, "hatch", "build", "sources"
    )
    package_dir = _dig(tool, "setuptools", "package-dir")
    if isinstance(hatch_sources, dict) and str(hatch_sources.get("", "")).strip("/") == name:
        return ok(f'hatch maps the folder to {name}/ (sources "" = "{name}")', file=_PYPROJECT)
    if isinstance(package_dir, dict) and str(package_dir.get(name, "")).rstrip("/") in (".", ""):
        return ok(f'setuptools maps the folder to {name} (package-dir "{name}" = ".")', file=_PYPROJECT)
    if backend.startswith("hatchling"):
        return problem(
            f"hatchling would not install the folder as {name}/ (no sources mapping)",
            file=_PYPROJECT,
            remediation=f'add [tool.hatch.build.targets.wheel] include = ["/*.py", "/py.typed", "/server"] and '
            f'[tool.hatch.build.targets.wheel.sources] "" = "{name}"',
        )
    if backend.startswith("setuptools"):
        return problem(
            f"setuptools would not install the folder as {name} (no package-dir mapping)",
            file=_PYPROJECT,
            remediation=f'add [tool.setuptools] packages = ["{name}", "{name}.server"] and '
            f'package-dir = {{"{name}" = ".", "{name}.server" = "server"}}',
        )
    return skipped(f"build backend {backend or '(none)'}: its package layout is not checked")


@register(
    "package.client",
    "The package exports a typed client and its models",
    severity="warning",
    stage="static",
    remediation="define `class MyEnv(EnvClient[MyAction, MyObservation, MyState])` in client.py and "
    "import it and the models in __init__.py (see `openenv init`)",
)
def _package_client(ctx: FolderContext) -> Finding:
    init = ctx.root / "__init__.py"
    if not init.is_file():
        return skipped("no __init__.py (see package.layout)")
    clients = _typed_clients(ctx)
    if not clients:
        return problem(
            "no class in the folder's modules subclasses the SDK's EnvClient[Action, Observation, State] "
            "(or upstream's MCPToolClient)",
            file="client.py" if (ctx.root / "client.py").is_file() else None,
        )
    exported = _imported_names(init)
    name, file, params, base = next((c for c in clients if c[0] in exported), clients[0])
    if name not in exported:
        return problem(
            f"{file} defines {name}, but __init__.py does not import it",
            file="__init__.py",
            remediation=f"add `from .{file.removesuffix('.py')} import {name}` to __init__.py",
        )
    missing = [p for p in params if p not in exported]
    if missing:
        return problem(
            f"__init__.py exports {name} but not its models {', '.join(missing)}",
            file="__init__.py",
            remediation=f"import {', '.join(missing)} in __init__.py too",
        )
    return ok(f"{name}({base})", file="__init__.py")


@register(
    "package.server_extra",
    "Server dependencies are an extra, not needed by the client",
    severity="warning",
    stage="static",
    remediation='keep dependencies = ["openenv-hub"] and put the server\'s in [project.optional-dependencies] '
    'server = ["openenv-hub[server]", ...server/requirements.txt]',
)
def _package_server_extra(ctx: FolderContext) -> Iterator[Finding]:
    if (skip := _need_project(ctx)) is not None:
        yield skip
        return
    assert ctx.pyproject is not None
    project: dict[str, Any] = ctx.pyproject["project"]
    base = [p for s in project.get("dependencies") or [] if isinstance(s, str) and (p := _parse(s))]
    extras = project.get("optional-dependencies") or {}
    server = [p for s in (extras.get("server") or []) if isinstance(s, str) and (p := _parse(s))]
    server_reqs = _requirements(ctx)
    upstream = [name + (f"[{','.join(sorted(ex))}]" if ex else "") for name, ex in base if name in _UPSTREAM_SDK_DISTS]
    if upstream and not any(name == "openenv-hub" for name, _ in base):
        yield ok(
            f"built on upstream's SDK ({upstream[0]}), which installs client and server as one: there is nothing to split",
            file=_PYPROJECT,
        )
        return
    found = 0
    heavy = [
        name + (f"[{','.join(sorted(ex))}]" if ex else "")
        for name, ex in base
        if name in _SERVER_ONLY or name in server_reqs or (name in _SDK_DISTS and ex)
    ]
    if heavy:
        found += 1
        yield problem(
            f"dependencies pull in what only the server needs: {', '.join(heavy)}",
            file=_PYPROJECT,
            line=_line_of(ctx, r"^\s*dependencies\s*="),
        )
    if not server:
        found += 1
        yield problem(
            "no `server` extra: `pip install '<env>[server]'` cannot install what serving it needs", file=_PYPROJECT
        )
    else:
        names = {n for n, _ in server}
        if not any(n in _SDK_DISTS and ex & {"server", "core"} for n, ex in server):
            found += 1
            yield problem("the `server` extra does not install the SDK's server (openenv-hub[server])", file=_PYPROJECT)
        lacking = sorted(set(server_reqs) - names)
        if lacking:
            found += 1
            yield problem(
                f"server/requirements.txt lists {', '.join(lacking)}, which the `server` extra lacks",
                file=_PYPROJECT,
                remediation="list the same packages in both: the image installs server/requirements.txt, pip the extra",
            )
    if not found:
        yield ok(
            f"the client needs {', '.join(n for n, _ in base) or 'nothing'}; `server` adds {len(server)} requirement(s)",
            file=_PYPROJECT,
        )


# -- helpers ----------------------------------------------------------------------------------------


def _names_the_env(dist: str, name: str) -> bool:
    """Whether the distribution `dist` is the env `name`'s package: the same name, or upstream's
    forms of it (`openenv-<name>`, with or without the `-env` / `_env` ending on either side)."""

    def core(text: str) -> str:
        return _files.normalize_dist(text).removeprefix("openenv-").removesuffix("-env")

    return bool(core(name)) and core(dist) == core(name)


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _line_of(ctx: FolderContext, pattern: str) -> int | None:
    try:
        lines = (ctx.root / _PYPROJECT).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    rx = re.compile(pattern)
    return next((i for i, line in enumerate(lines, 1) if rx.match(line)), None)


def _requirements(ctx: FolderContext) -> set[str]:
    names: set[str] = set()
    for req in (ctx.root / "server" / "requirements.txt", ctx.root / "requirements.txt"):
        if req.is_file():
            for line in req.read_text(encoding="utf-8", errors="replace").splitlines():
                line = line.split("#")[0].strip()
                if line and not line.startswith("-") and (parsed := _parse(line)) and parsed[0] not in _SDK_DISTS:
                    names.add(parsed[0])
    return names


def _typed_clients(ctx: FolderContext) -> list[tuple[str, str, list[str], str]]:
    """(class name, file, [the env's own type parameters], base as written) of each client class at
    the folder's root.

    A client subclasses the SDK's `EnvClient[A, O, S]` (ours or upstream's `openenv.core`), or
    upstream's `MCPToolClient`, imported from the SDK. Type parameters the file imports from the SDK
    (upstream's template uses the SDK's own `State`) are not the env's models.
    """
    found = []
    for path in sorted(ctx.root.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
        except (SyntaxError, ValueError):
            continue
        from_sdk = _names_from_sdk(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                target = base.value if isinstance(base, ast.Subscript) else base
                if not _is_sdk_name(target, from_sdk):
                    continue
                if isinstance(base, ast.Subscript) and _base_name(target) in _GENERIC_CLIENTS:
                    params = base.slice.elts if isinstance(base.slice, ast.Tuple) else [base.slice]
                    own = [ast.unparse(p) for p in params if ast.unparse(p) not in from_sdk]
                    found.append((node.name, path.name, own, ast.unparse(base)))
                elif not isinstance(base, ast.Subscript) and _base_name(target) in _PLAIN_CLIENTS:
                    found.append((node.name, path.name, [], ast.unparse(base)))
    return found


def _names_from_sdk(tree: ast.Module) -> set[str]:
    """Names a module binds by importing them from the SDK (`openenv...`, `openenv_core...`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in _SDK_MODULES:
            names.update(a.asname or a.name for a in node.names)
    return names


def _is_sdk_name(node: ast.expr, from_sdk: set[str]) -> bool:
    """`EnvClient` imported from the SDK, or an attribute of the SDK's modules (`openenv.core.EnvClient`)."""
    if isinstance(node, ast.Name):
        return node.id in from_sdk
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in _SDK_MODULES


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _imported_names(init: Any) -> set[str]:
    """Names `__init__.py` binds at module level through imports."""
    try:
        tree = ast.parse(init.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names
