"""Import an env's ASGI app in a child Python and describe it, without touching this process.

The child imports the app the way a Dockerfile runs it: first plainly, with the env folder first
on `sys.path` (`cd /app/env && uvicorn server.app:app`); when that fails only because the env
imports its own package by name (its pyproject maps the package to the folder and the image
runs `pip install -e .`), again with the folder importable under that name; when it fails only because the app
imports itself relatively (upstream's package-mode envs, run as `uvicorn <pkg>.server.app:app`),
again as the package `<pkg>`: the folder is registered under that name (never copied) and
`<pkg>.server.app` is imported. The child writes a JSON description to a file and exits.
Importing in a child keeps an env's side effects, modules and crashes out of the validator (the
Hub validates thousands).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AppProbe", "probe_app"]

_CHILD = r"""
import importlib, importlib.machinery, importlib.util, json, os, sys, traceback
args = json.loads(sys.argv[1])
root = os.path.abspath(args["root"])
sys.path[:0] = [root]
os.chdir(root)
out = {"ok": False}

def under_root(path):
    return bool(path) and (os.path.abspath(path) + os.sep).startswith(root + os.sep)

def where(exc):
    frames = traceback.extract_tb(exc.__traceback__) if isinstance(exc, BaseException) else []
    for fr in reversed(frames):
        if under_root(fr.filename):
            return {"file": os.path.relpath(fr.filename, root), "line": fr.lineno}
    return None

def chain(exc):
    # the exception, then what caused it or was being handled, depth first, each once
    found, todo = [], [exc]
    while todo and len(found) < 32:
        e = todo.pop(0)
        if e is None or any(e is f for f in found):
            continue
        found.append(e)
        todo[:0] = [e.__cause__, e.__context__]
    return found

def relative_only(exc):
    # the import failed because a relative import ran outside a package, nothing else
    return type(exc) is ImportError and "relative import" in str(exc)

def describe(exc):
    d = {"error_type": type(exc).__name__, "message": str(exc)[:2000], "location": where(exc),
         "missing_modules": [e.name for e in chain(exc) if isinstance(e, ModuleNotFoundError) and e.name],
         "traceback": "".join(traceback.format_exception(exc))[-4000:]}
    if isinstance(exc, SyntaxError) and exc.filename:
        d["location"] = {"file": os.path.relpath(exc.filename, root), "line": exc.lineno}
    return d

def forget_env_modules():
    for name, mod in list(sys.modules.items()):
        paths = [getattr(mod, "__file__", None), *list(getattr(mod, "__path__", None) or [])]
        if any(isinstance(p, str) and under_root(p) for p in paths):
            del sys.modules[name]
    importlib.invalidate_caches()

def register_package(pkg, tolerant=False):
    init = os.path.join(root, "__init__.py")
    if os.path.isfile(init) and tolerant:
        try:
            register_package(pkg)
            return
        except BaseException:
            forget_env_modules()
            init = None  # an __init__ that needs what is not here: the package's modules still import
    if init and os.path.isfile(init):
        spec = importlib.util.spec_from_file_location(pkg, init, submodule_search_locations=[root])
    else:
        spec = importlib.machinery.ModuleSpec(pkg, None, is_package=True)
        spec.submodule_search_locations = [root]
    module = importlib.util.module_from_spec(spec)
    sys.modules[pkg] = module
    if spec.loader is not None:
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(pkg, None)
            raise

mode, target = "plain", args["module"]
try:
    module = importlib.import_module(target)
    error = None
except BaseException as exc:
    module, error = None, exc
installed = [p for p in args.get("installed") or [] if p not in sys.modules]
if error is not None and installed and any(
        (m or "").split(".")[0] in installed
        for m in [e.name for e in chain(error) if isinstance(e, ModuleNotFoundError)]):
    # The env imports itself by its package name: its pyproject maps that package to the folder,
    # and the image installs it (`pip install -e .`, `uv sync`). Install it the same way here, in
    # this child only (registered under its name, never copied), and import the app again.
    out["plain_error"] = describe(error)
    forget_env_modules()
    mode = "installed"
    try:
        for name in installed:
            register_package(name, tolerant=True)
        module, error = importlib.import_module(target), None
    except BaseException as exc:
        module, error = None, exc
pkg = args.get("package")
if error is not None and pkg and relative_only(error) and pkg not in sys.modules:
    out["plain_error"] = describe(error)
    forget_env_modules()
    mode, target = "package", pkg + "." + args["module"]
    try:
        register_package(pkg)
        module, error = importlib.import_module(target), None
    except BaseException as exc:
        module, error = None, exc
out.update(import_mode=mode, imported=target)
if error is not None:
    d = describe(error)
    out.update(stage="import", **d)
    out["missing_module"] = getattr(error, "name", None) if isinstance(error, ImportError) else None
else:
    obj = getattr(module, args["attr"], None)
    if obj is None:
        out.update(stage="attr", message="module %s has no attribute %r" % (target, args["attr"]),
                   names=sorted(n for n in dir(module) if not n.startswith("_"))[:50])
    elif not callable(obj):
        out.update(stage="asgi", message="%s is a %s, not an ASGI app" % (args["attr"], type(obj).__name__))
    else:
        t = type(obj)
        routes = []
        for r in getattr(obj, "routes", []) or []:
            path = getattr(r, "path", None)
            if isinstance(path, str):
                routes.append(path)
        runtime = getattr(getattr(obj, "state", None), "openenv_runtime", None)
        out.update(ok=True, app_type=t.__module__ + "." + t.__qualname__, routes=routes, ours=runtime is not None,
                   title=getattr(obj, "title", None))
        if runtime is not None:
            try:
                out["action_schema"] = runtime.action_cls.model_json_schema()
            except Exception as exc:
                out["action_schema_error"] = str(exc)[:500]
with open(args["out"], "w") as f:
    json.dump(out, f, default=str)
"""


@dataclass(slots=True)
class AppProbe:
    """What importing the app showed.

    Attributes:
        ok: the module imported and the attribute is a callable (an ASGI app).
        stage: where it failed: "import", "attr", "asgi", "timeout" or "crash".
        missing_module: for an ImportError, the module that was not found.
        missing_modules: every module not found along the failure's exception chain (`raise ...
            from`, or raised while handling another), nearest first.
        import_mode: "plain" (`server.app` from the folder), "installed" (the same, with the folder
            also importable under the package names its pyproject maps to it, as `pip install -e .`
            makes it in the image) or "package" (`<pkg>.server.app`).
        location: {"file", "line"} in the env where it failed, when known.
        data: the child's whole description (routes, app_type, traceback, ...).
    """

    ok: bool
    stage: str | None = None
    message: str = ""
    missing_module: str | None = None
    location: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    missing_modules: list[str] = field(default_factory=list)
    import_mode: str = "plain"


def probe_app(
    root: Path,
    module: str,
    attr: str,
    *,
    package: str | None = None,
    installed: list[str] | None = None,
    python: str | None = None,
    timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
) -> AppProbe:
    """Import `module:attr` from the env folder `root` in a child Python.

    Args:
        package: the name to import the folder as a package under when the plain import fails
            on relative imports (None: never).
        installed: package names the env's pyproject maps to the folder itself: when the plain
            import fails only because one of them is missing, the folder is made importable under
            them (as installing the project does in its image) and the import is tried again.
        python: the interpreter to use (default: this one); point it at the env's own venv to
            check an env whose dependencies are not installed here.
        env: the child's environment variables (default: this process's).
    """
    if python and os.sep in python and not os.path.isabs(python):
        python = os.path.abspath(python)  # the child runs in the env folder: a relative path would miss
    with tempfile.TemporaryDirectory(prefix="openenv-probe-") as tmp:
        out_file = Path(tmp) / "probe.json"
        child_env = dict(os.environ if env is None else env)
        child_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        args = json.dumps(
            {
                "root": str(root.resolve()),
                "module": module,
                "attr": attr,
                "package": package,
                "installed": list(installed or []),
                "out": str(out_file),
            }
        )
        try:
            proc = subprocess.run(
                [python or sys.executable, "-c", _CHILD, args],
                cwd=str(root),
                env=child_env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return AppProbe(False, "timeout", f"importing {module} took longer than {timeout_s:g}s")
        except OSError as exc:
            return AppProbe(False, "crash", f"cannot run {python or sys.executable}: {exc.strerror}")
        if not out_file.is_file():
            tail = (proc.stderr or proc.stdout or "").strip()[-1500:]
            return AppProbe(
                False,
                "crash",
                f"the import process exited with {proc.returncode} before reporting",
                data={"output": tail},
            )
        data = json.loads(out_file.read_text())
    return AppProbe(
        ok=bool(data.get("ok")),
        stage=data.get("stage"),
        message=str(data.get("message", "")),
        missing_module=data.get("missing_module"),
        location=data.get("location"),
        data=data,
        missing_modules=[str(m) for m in data.get("missing_modules") or []],
        import_mode=str(data.get("import_mode") or "plain"),
    )
