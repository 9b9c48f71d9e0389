"""`/web`: the env server's own play page, plain HTML and JavaScript over the env's `/ws`.

Turned on by `OPENENV_ENABLE_WEB_INTERFACE` (env Dockerfiles set it, so every Space has it) or by
`create_app(..., enable_web_interface=True)`. Each browser tab opens its own WebSocket, so each
tab plays its own session, never a shared env. The page is three small static files read on
first request: nothing is imported for it beyond what the server already has, and the `/ws` hot
path is not touched (the route is an ordinary HTTP route).
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

__all__ = ["add_web_routes"]

_STATIC = Path(__file__).resolve().parent / "web_static"
_TYPES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
# The page loads only its own script and style, talks only to its own server, and shows images
# only from data: URLs (observations carry screens as base64 PNG). No inline script may run.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'"
)
_HEADERS = {"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


@functools.lru_cache(maxsize=8)
def _read(name: str) -> str:
    return (_STATIC / name).read_text(encoding="utf-8")


def add_web_routes(app: Any, title: str) -> None:
    """Serve the play page at `/web` (and `/web/`), its assets under `/web/`, and send `/` there."""

    def page(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        body = _read("index.html").replace("{{ROOT}}", html.escape(root, quote=True)).replace("{{TITLE}}", html.escape(title))
        return Response(body, media_type="text/html; charset=utf-8", headers=_HEADERS)

    def asset(name: str) -> Response:
        if name not in _TYPES:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(_read(name), media_type=_TYPES[name], headers=_HEADERS)

    def home(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        return RedirectResponse(f"{root}/web", status_code=307)

    app.add_api_route("/web", page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/web/", page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/web/{name}", asset, methods=["GET"], include_in_schema=False)
    app.add_api_route("/", home, methods=["GET"], include_in_schema=False)
