"""Run an env server with uvicorn on the fastest transport settings this machine has."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

__all__ = ["serve", "uvicorn_options"]


def uvicorn_options(max_message_bytes: int | None = None) -> dict[str, Any]:
    """uvicorn settings for env servers: uvloop + httptools when present, sans-I/O websockets,
    no per-message compression (it costs more CPU than it saves on loopback and in-region links),
    and a frame limit a little above the app's own so oversize frames get a typed error."""
    from openenv.server.settings import get_settings

    limit = max_message_bytes or get_settings().max_message_bytes
    return {
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
        "ws": "websockets-sansio",
        "ws_per_message_deflate": False,
        "ws_max_size": limit + (1 << 20),
        "timeout_graceful_shutdown": 5,
    }


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
