"""The website's server-rendered pages, answered before the Gradio app mounted at `/`.

- `GET /`: the catalog (query parameters q, tag, status, sort), plain HTML.
- `GET /envs/<owner>/<name>`: an env's page, with the play panel framed inside it.
- `GET /?env=owner/name` (the old env URL): a permanent redirect to its page.
- `GET /?panel=play&env=owner/name`: the Gradio play / model-try panel (what the page frames);
  `/?panel=site` is the whole Gradio app. Everything else passes to Gradio untouched.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from hub_service.quota import SharedRateLimiter
from hub_service.settings import HubSettings
from hub_service.ui.guard import visitor_key

__all__ = ["WebPages", "mount_website"]

log = logging.getLogger("hub_service.web")
_MAX_QUERY = 2048  # a catalog query is a few words; anything longer is not one


def mount_website(app: Any) -> Any:
    """Mount the website on the service `app`: the Gradio app at `/` (hub_service.ui), and these
    pages in front of it."""
    from hub_service.ui import mount_website as mount_gradio

    mounted = mount_gradio(app)
    app.add_middleware(WebPages, settings=app.state.settings, factory=app.state.sessionmaker, limiter=app.state.limiter)
    return mounted


class WebPages:
    """ASGI middleware serving the catalog and env pages; other requests go to `app`."""

    def __init__(
        self, app: Any, settings: HubSettings, factory: sessionmaker[Session], limiter: SharedRateLimiter
    ) -> None:
        self.app = app
        self.settings = settings
        self.factory = factory
        self.limiter = limiter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "") or ""
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        raw_query: bytes = scope.get("query_string", b"")
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(raw_query.decode("latin-1")).items()}
        if path == "/" and "panel" in params:
            from hub_service.web.pages import watch_panel_load  # a panel that fails to load says so, and retries

            await self.app(scope, receive, watch_panel_load(send) if params["panel"] == "play" else send)
            return
        if path != "/" and not path.startswith("/envs/") and path != "/envs":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        decision = await self.limiter.ahit("api", visitor_key(str(client[0]) if client else None))
        if not decision.allowed:
            await _send(
                send, 429, f"Too many pages in a short time: wait {decision.retry_after_s} s.", decision.headers()
            )
            return
        await self._page(path, root, params, raw_query, scope, send)

    async def _page(
        self, path: str, root: str, params: dict[str, str], raw_query: bytes, scope: dict[str, Any], send: Any
    ) -> None:
        import anyio.to_thread

        from hub_service.web import pages

        head = scope.get("method") == "HEAD"
        if len(raw_query) > _MAX_QUERY:
            await _send(send, 414, pages.not_found_page(self.settings, root, "That query is too long."), head=head)
            return
        if path == "/" and params.get("env"):
            env_id = params["env"].strip().strip("/")
            await _redirect(send, pages.env_path(root, env_id))
            return
        if path == "/":
            status, html = await anyio.to_thread.run_sync(pages.catalog_page, self.settings, self.factory, root, params)
            await _send(send, status, html, head=head)
            return
        parts = [p for p in path[len("/envs/") :].split("/") if p] if path.startswith("/envs/") else []
        if len(parts) != 2:
            text = "An environment's page is /envs/<owner>/<name>; find it in the catalog."
            await _send(send, 404, pages.not_found_page(self.settings, root, text), head=head)
            return
        from starlette.requests import Request

        seen_at = str(Request(scope).base_url)  # scheme, Host and root path, as the visitor reached it
        status, html = await anyio.to_thread.run_sync(
            pages.env_page, self.settings, self.factory, root, parts[0], parts[1], seen_at
        )
        await _send(send, status, html, head=head)


async def _send(
    send: Any, status: int, html: str, headers: list[tuple[bytes, bytes]] | None = None, head: bool = False
) -> None:
    body = html.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
                # The pages run no script of their own; the framed panel is same-origin.
                (b"content-security-policy", b"script-src 'none'; object-src 'none'; frame-ancestors 'self'"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _redirect(send: Any, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 308,
            "headers": [(b"location", location.encode("latin-1", "replace")), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
