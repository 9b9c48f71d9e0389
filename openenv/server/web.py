"""`/web`: the env server's own play page, plain HTML and JavaScript over the env's `/ws`.

Turned on by `OPENENV_ENABLE_WEB_INTERFACE` (env Dockerfiles set it, so every Space has it) or by
`create_app(..., enable_web_interface=True)`. Each browser tab opens its own WebSocket, so each
tab plays its own session, never a shared env. The page is three small static files read on
first request: nothing is imported for it beyond what the server already has, and the `/ws` hot
path is not touched (the route is an ordinary HTTP route).

`POST /web/view` is the page's one helper: given the latest observation and the frame the env
rendered (the "render" extension, asked over the page's own WebSocket), it answers the frame as
safe HTML (`openenv.render.frame_html`) and the buttons to offer (`openenv.render.action_choices`),
so the page and the Hub's website share one implementation of both.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from openenv.protocol import JSONDecodeError, loads

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


_VIEW_MAX_BYTES = 16 * 1024 * 1024


@functools.lru_cache(maxsize=8)
def _read(name: str) -> str:
    text = (_STATIC / name).read_text(encoding="utf-8")
    if name == "app.css":  # the colours of ANSI frames, from the module that writes their classes
        from openenv.render import ANSI_CSS

        text += "\n" + ANSI_CSS + "\n"
    return text


def _view(body: Any, action_schema: dict[str, Any]) -> dict[str, Any]:
    """`{"frame_html", "choices"}` for `{"frame", "observation"}` (see the module docstring)."""
    from openenv.render import Frame, action_choices, frame_html

    if not isinstance(body, dict):
        raise ValueError('send {"frame": <frame or null>, "observation": <observation reply or null>}')
    html_snippet = None
    if body.get("frame") is not None:
        html_snippet = frame_html(Frame.from_wire(body["frame"]), alt="the environment now")
    observation = body.get("observation")
    choices = action_choices(action_schema, observation if isinstance(observation, dict) else None)
    return {
        "frame_html": html_snippet,
        "choices": None if choices is None else [{"label": c.label, "action": c.action, "key": c.key} for c in choices],
    }


def add_web_routes(app: Any, title: str) -> None:
    """Serve the play page at `/web` (and `/web/`), its assets under `/web/`, and send `/` there."""

    def page(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        body = (
            _read("index.html")
            .replace("{{ROOT}}", html.escape(root, quote=True))
            .replace("{{TITLE}}", html.escape(title))
        )
        return Response(body, media_type="text/html; charset=utf-8", headers=_HEADERS)

    def asset(name: str) -> Response:
        if name not in _TYPES:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(_read(name), media_type=_TYPES[name], headers=_HEADERS)

    schema: dict[str, Any] = {}

    async def view(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > _VIEW_MAX_BYTES:
            return JSONResponse(
                {"detail": f"the request is over {_VIEW_MAX_BYTES} bytes"}, status_code=413, headers=_HEADERS
            )
        if not schema:
            runtime = getattr(app.state, "openenv_runtime", None)
            schema.update(runtime.action_cls.model_json_schema() if runtime is not None else {})
        try:
            return JSONResponse(_view(loads(raw), schema), headers=_HEADERS)
        except (JSONDecodeError, ValueError) as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400, headers=_HEADERS)

    def home(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        return RedirectResponse(f"{root}/web", status_code=307)

    app.add_api_route("/web", page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/web/", page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/web/view", view, methods=["POST"], include_in_schema=False)
    app.add_api_route("/web/{name}", asset, methods=["GET"], include_in_schema=False)
    app.add_api_route("/", home, methods=["GET"], include_in_schema=False)
