"""Run an env server with uvicorn on the fastest transport settings this machine has."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["listen_backlog", "serve", "serve_in_thread", "uvicorn_options"]


def uvicorn_options(max_message_bytes: int | None = None) -> dict[str, Any]:
    """uvicorn settings for env servers: uvloop + httptools when present, sans-I/O websockets,
    no per-message compression (it costs more CPU than it saves on loopback and in-region links),
    a frame limit a little above the app's own so oversize frames get a typed error, and an accept
    queue as long as the kernel allows (thousands of clients connecting at once)."""
    from openenv.server.settings import get_settings

    limit = max_message_bytes or get_settings().max_message_bytes
    return {
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
        "ws": "websockets-sansio",
        "ws_per_message_deflate": False,
        "ws_max_size": limit + (1 << 20),
        "timeout_graceful_shutdown": 5,
        "backlog": listen_backlog(),
    }


def listen_backlog() -> int:
    """The accept queue's length: the kernel's cap (net.core.somaxconn), at least uvicorn's 2048."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            cap = int(f.read().strip())
    except (OSError, ValueError):
        cap = 0
    return max(2048, min(cap, 65535))


def serve(
    app: Any,
    *,
    host: str | None = None,
    port: int | None = None,
    reload: bool = False,
    log_level: str = "info",
    app_dir: str | None = None,
) -> None:
    """Serve `app` (an ASGI app or an import string like "server.app:app"); blocks.

    Host and port default to $HOST / $PORT, then 0.0.0.0:8000 (the Space convention).
    """
    import uvicorn

    uvicorn.run(
        app,
        host=host or os.environ.get("HOST", "0.0.0.0"),
        port=port if port is not None else int(os.environ.get("PORT", "8000")),
        reload=reload,
        log_level=log_level,
        app_dir=app_dir,
        **uvicorn_options(),
    )


@contextlib.contextmanager
def serve_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 30.0
) -> Iterator[str]:
    """Serve `app` in a background thread for the duration of a `with` block.

    For notebooks, examples and tests: the server shares this process, so the environment's
    code can be inspected while a client drives it. Port 0 picks a free port.

        with serve_in_thread(app) as url:
            with MyEnv(url).sync() as env: ...

    Yields:
        The server's base URL, e.g. "http://127.0.0.1:53817".

    Raises:
        RuntimeError: the server did not start within `start_timeout_s` (e.g. the port is taken).
    """
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", **uvicorn_options()))
    thread = threading.Thread(target=server.run, name="openenv-serve-in-thread", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}; is the port free? (see the log above)")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(15)
