"""Helpers for testing environments: serve an app on 127.0.0.1 for the length of a test.

    from openenv.testing import serve_app

    def test_round_trip():
        with serve_app(app) as url, MyEnv(url).sync() as env:
            env.reset()

Needs the `server` extra (uvicorn).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["serve_app"]


@contextlib.contextmanager
def serve_app(app: Any, *, startup_timeout_s: float = 20.0) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free 127.0.0.1 port in a thread; yields its base URL.

    Raises:
        RuntimeError: the server did not start within `startup_timeout_s`.
    """
    import uvicorn

    from openenv.server.run import uvicorn_options

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **uvicorn_options())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="openenv-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start; see the log above")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
