"""The shared background event loop that blocking calls run on (`run_sync`).

One daemon thread per process runs it. Blocking calls are handed to it and waited for, so they
work the same in a script, in a thread and inside Jupyter (whose own loop already runs in the
calling thread), and the loop keeps answering servers' pings between calls. `SyncEnvClient` and
`Provider.start()` both use it; it imports nothing of theirs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["loop_running", "run_sync"]

T = TypeVar("T")

_THREAD_NAME = "openenv-sync-loop"
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = _new_loop()
            ready = threading.Event()

            def _run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=_run, name=_THREAD_NAME, daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def loop_running() -> bool:
    """Whether the shared loop was started and is not closed (without starting it)."""
    return _loop is not None and not _loop.is_closed()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the shared background loop and block until it finishes.

    Raises:
        RuntimeError: called from the loop's own thread (it would wait for itself forever).
    """
    loop = _background_loop()
    if threading.current_thread().name == _THREAD_NAME:
        coro.close()
        raise RuntimeError("a sync client call was made from inside the sync loop; use the async client there")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
