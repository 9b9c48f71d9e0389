"""`openenv serve [PATH] [--port N] [--reload]`: run an environment locally, without Docker."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import socket
import sys
import traceback
from pathlib import Path

from openenv.cli._env import env_folder
from openenv.cli._output import CliError, Output

DESCRIPTION = """Run an environment's server in this Python (no Docker), the way its image would:
the app named in openenv.yaml, imported from the env's folder, served by uvicorn."""

EXAMPLES = """
openenv serve envs/echo_env
openenv serve my_env --port 8001 --reload     # restart when a file changes
openenv serve . --host 0.0.0.0                # reachable from other machines
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="the env folder (default: the current folder)")
    parser.add_argument("--port", type=int, help="port (default: the manifest's port, usually 8000)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--reload", action="store_true", help="restart the server when the env's files change")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.manifest import find_app_module

    root, manifest = env_folder(args.path)
    root = root.resolve()
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None:
        raise CliError("serving needs the server extra (uvicorn, fastapi)", "pip install 'openenv-hub[server]'")
    module = find_app_module(root, manifest.app_module)
    if module is None:
        raise CliError(
            f"the app module {manifest.app_module!r} is not a file in {root}",
            f"fix `app:` in openenv.yaml; run `openenv validate {args.path}`",
        )
    port = args.port if args.port is not None else manifest.port
    if not 0 < port < 65536:
        raise CliError(f"port {port} is out of range", "pass --port with a number from 1 to 65535", exit_code=2)
    if not _port_free(args.host, port):
        raise CliError(
            f"port {port} on {args.host} is already in use", f"pass --port {port + 1}, or stop the other server"
        )
    os.chdir(root)
    sys.path.insert(0, str(root))
    target = f"{module}:{manifest.app_attr}"
    app: object = target
    if not args.reload:  # import here, so a broken env gets one clear line instead of a uvicorn traceback
        app = _import_app(module, manifest.app_attr, root)
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{port}"
    out.mark(
        "ok", f"serving {manifest.name} on {url}  (WebSocket {url.replace('http', 'ws', 1)}/ws, API docs {url}/docs)"
    )
    out.line("Press Ctrl-C to stop.", style="dim")
    from openenv.server.run import serve

    serve(app, host=args.host, port=port, reload=args.reload, log_level=args.log_level, app_dir=str(root))
    return 0


def _import_app(module: str, attr: str, root: Path) -> object:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing.startswith(("openenv.core", "openenv_core")):
            raise CliError(
                f"{module} is written for upstream openenv-core ({missing})",
                "run it in a virtualenv with openenv-core, or port its imports to `openenv`",
            ) from None
        raise CliError(
            f"importing {module} failed: {exc}", f"install the env's dependencies (pip install {missing.split('.')[0]})"
        ) from None
    except Exception as exc:
        where = _where(exc, root)
        raise CliError(
            f"importing {module} failed{where}: {type(exc).__name__}: {exc}",
            "fix the error; OPENENV_DEBUG=1 shows the traceback",
        ) from exc
    app = getattr(mod, attr, None)
    if app is None or not callable(app):
        raise CliError(f"{module} has no ASGI app named {attr!r}", "fix `app:` in openenv.yaml (module:attribute)")
    return app


def _where(exc: BaseException, root: Path) -> str:
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" at {os.path.relpath(exc.filename, root)}:{exc.lineno}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith(str(root) + os.sep):
            return f" at {os.path.relpath(frame.filename, root)}:{frame.lineno}"
    return ""
