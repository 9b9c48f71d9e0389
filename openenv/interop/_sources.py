"""What the Verifiers and ORS adapters share: loading an imported source from the folder it was copied
into, awaiting what a source's methods return from sync code, and turning its values into JSON."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openenv.errors import ConfigurationError

__all__ = ["jsonable", "load_entry", "resolve"]


def load_entry(root: Path, module: str, name: str) -> Any:
    """`name` from `module` of the source copied into `root` (put first on `sys.path`, as the source's
    own folder is when its author runs it, so its sibling imports work).

    Raises:
        ConfigurationError: the module cannot be imported (its error and what to install), or it has no `name`.
    """
    where = str(root)
    if where not in sys.path:
        sys.path.insert(0, where)
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot import {module} from the imported source ({root}): {type(exc).__name__}: {exc}; "
            "install what server/requirements.txt lists"
        ) from exc
    try:
        return getattr(loaded, name)
    except AttributeError:
        raise ConfigurationError(f"{module} in {root} defines no {name}") from None


def resolve(value: Any) -> Any:
    """`value`, awaited when it is awaitable: from sync code with no loop running, on a fresh loop;
    inside a running loop (a sync method called from async code), on a fresh loop in a thread."""
    if not inspect.isawaitable(value):
        return value
    awaitable = value

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(wait())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="openenv-interop-await")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def jsonable(value: Any) -> Any:
    """`value` as JSON-able data: pydantic models dumped, mappings and sequences walked, anything else
    that JSON has no word for as its `str`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)
