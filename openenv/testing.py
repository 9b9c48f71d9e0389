"""Helpers for testing environments: serve an app on 127.0.0.1 for the length of a test.

    from openenv.testing import serve_app

    def test_round_trip():
        with serve_app(app) as url, MyEnv(url).sync() as env:
            env.reset()

Needs the `server` extra (uvicorn).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["serve_app"]


@contextlib.contextmanager
def serve_app(app: Any, *, startup_timeout_s: float = 20.0) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free 127.0.0.1 port in a thread; yields its base URL.

    Raises:
        RuntimeError: the server did not start within `startup_timeout_s`.
    """
    from openenv.server.run import serve_in_thread

    with serve_in_thread(app, start_timeout_s=startup_timeout_s) as url:
        yield url
