"""The one event loop every contestant of a benchmark runs on, client and server side.

Standard library only: the drivers import this module under upstream's venv too (its `openenv`
package is not ours). uvloop is required, never a silent fall-back to asyncio: a contestant on
another loop would measure the loop, not the stack. `bash scripts/bootstrap` puts uvloop in our
venv (uvicorn[standard]); `bash scripts/upstream-venv` puts the same version in upstream's.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

LOOP = "uvloop"
T = TypeVar("T")


def require() -> str:
    """The version of uvloop in this interpreter; exits with what to run when it is missing."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"{sys.executable} has no {LOOP}: every benchmark contestant runs on {LOOP}. "
            "Run `bash scripts/bootstrap` (our venv) and `bash scripts/upstream-venv` (upstream's venv)."
        ) from None
    return importlib.metadata.version(LOOP)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on uvloop (asyncio.run's counterpart); exits if uvloop is missing."""
    require()
    import uvloop

    return uvloop.run(main)


def running() -> str:
    """The implementation of the running loop: "uvloop" or "asyncio" (call from a coroutine)."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.split(".")[0] == "uvloop" else "asyncio"


def of_process(pid: int) -> str:
    """The loop a running (Python) server process uses, from the libraries mapped into it: "uvloop"
    when uvloop's extension is loaded, else "asyncio". Linux only (/proc)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return "uvloop" if "/uvloop/loop." in maps else "asyncio"
