"""Import an env's ASGI app in a child Python and describe it, without touching this process.

The child runs `_CHILD` with the env folder first on `sys.path` (as `uvicorn server.app:app` run
from the folder would), writes a JSON description to a file, and exits. Importing in a child keeps
an env's side effects, modules and crashes out of the validator (the Hub validates thousands).
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

_CHILD = r'''
import importlib, json, os, sys, traceback
args = json.loads(sys.argv[1])
root = args["root"]
sys.path[:0] = [root]
os.chdir(root)
out = {"ok": False}
def where(tb_or_exc):
    frames = traceback.extract_tb(tb_or_exc.__traceback__) if isinstance(tb_or_exc, BaseException) else []
    for fr in reversed(frames):
        if fr.filename and os.path.abspath(fr.filename).startswith(os.path.abspath(root) + os.sep):
            return {"file": os.path.relpath(fr.filename, root), "line": fr.lineno}
    return None
try:
    module = importlib.import_module(args["module"])
except BaseException as exc:
    out.update(stage="import", error_type=type(exc).__name__, message=str(exc)[:2000],
               missing_module=getattr(exc, "name", None) if isinstance(exc, ImportError) else None,
               location=where(exc), traceback="".join(traceback.format_exception(exc))[-4000:])
    if isinstance(exc, SyntaxError) and exc.filename:
        out["location"] = {"file": os.path.relpath(exc.filename, root), "line": exc.lineno}
else:
    obj = getattr(module, args["attr"], None)
    if obj is None:
        out.update(stage="attr", message="module %s has no attribute %r" % (args["module"], args["attr"]),
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
'''


@dataclass(slots=True)
class AppProbe:
    """What importing the app showed.

    Attributes:
        ok: the module imported and the attribute is a callable (an ASGI app).
        stage: where it failed: "import", "attr", "asgi", "timeout" or "crash".
        missing_module: for an ImportError, the module that was not found.
        location: {"file", "line"} in the env where it failed, when known.
        data: the child's whole description (routes, app_type, traceback, ...).
    """

    ok: bool
    stage: str | None = None
    message: str = ""
    missing_module: str | None = None
    location: dict[str, Any] | None = None
    data: dict[str, Any] = field(default_factory=dict)


def probe_app(root: Path, module: str, attr: str, *, python: str | None = None, timeout_s: float = 60.0, env: dict[str, str] | None = None) -> AppProbe:
    """Import `module:attr` from the env folder `root` in a child Python.

    Args:
        python: the interpreter to use (default: this one); point it at the env's own venv to
            check an env whose dependencies are not installed here.
        env: the child's environment variables (default: this process's).
    """
    with tempfile.TemporaryDirectory(prefix="openenv-probe-") as tmp:
        out_file = Path(tmp) / "probe.json"
        child_env = dict(os.environ if env is None else env)
        child_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        args = json.dumps({"root": str(root.resolve()), "module": module, "attr": attr, "out": str(out_file)})
        try:
            proc = subprocess.run(
                [python or sys.executable, "-c", _CHILD, args], cwd=str(root), env=child_env,
                capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return AppProbe(False, "timeout", f"importing {module} took longer than {timeout_s:g}s")
        except OSError as exc:
            return AppProbe(False, "crash", f"cannot run {python or sys.executable}: {exc.strerror}")
        if not out_file.is_file():
            tail = (proc.stderr or proc.stdout or "").strip()[-1500:]
            return AppProbe(False, "crash", f"the import process exited with {proc.returncode} before reporting", data={"output": tail})
        data = json.loads(out_file.read_text())
    return AppProbe(
        ok=bool(data.get("ok")),
        stage=data.get("stage"),
        message=str(data.get("message", "")),
        missing_module=data.get("missing_module"),
        location=data.get("location"),
        data=data,
    )
