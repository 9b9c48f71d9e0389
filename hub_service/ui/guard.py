"""Limits on the website's own routes (Gradio's `/gradio_api/...`): a rate limit per visitor on the
requests that run something (events, queue joins), no file uploads, since no component of
the site takes a file (an upload would only sit in Gradio's cache on the service's disk), and
requests Gradio would answer with a server error or a broken stream (a body that is not an event,
an unknown function or event) refused first with a 4xx (hub_service/ui/gradio_shape.py). Gradio's
direct route, open only to the play panel's steps, has its server errors (inputs of the wrong
shape) answered as 422s.
"""

from __future__ import annotations

import logging
from typing import Any

from hub_service.limits import RateLimiter, reply_error
from hub_service.quota import SharedRateLimiter
from hub_service.ui.gradio_shape import GradioShape

__all__ = ["WebsiteGuard", "visitor_key"]

log = logging.getLogger("hub_service.ui")
_PREFIX = "/gradio_api/"
_MAX_EVENT_BODY = 256 * 1024  # an event's inputs are a form's fields and a chat message, never more


def visitor_key(host: str | None) -> str:
    """Who a visitor is, for caps and rate limits: their IPv4 address, or their IPv6 /64 (one
    subscriber usually gets a whole /64, so single IPv6 addresses cost nothing to change)."""
    import ipaddress

    if not host:
        return "unknown"
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class WebsiteGuard:
    """ASGI middleware for the website's routes; everything else passes untouched.

    Args:
        limiter: has a "web" category; every POST under /gradio_api/ costs one token.
    """

    def __init__(self, app: Any, limiter: RateLimiter | SharedRateLimiter, blocks: Any = None) -> None:
        self.app = app
        self.limiter = limiter
        self.shape = GradioShape(blocks) if blocks is not None else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(_PREFIX):
            await self.app(scope, receive, send)
            return
        if scope.get("method") != "POST":
            refusal = self.shape.refuse_get(path, scope.get("query_string", b"")) if self.shape else None
            if refusal is not None:
                log.info("refused %s %s: %s", scope.get("method"), path, refusal[1]["message"])
                await reply_error(send, *refusal)
                return
            await self.app(scope, receive, send)
            return
        if path.rstrip("/") == _PREFIX + "upload":
            await reply_error(
                send,
                403,
                {
                    "code": "uploads_disabled",
                    "message": "this website takes no file uploads; "
                    "use the JSON API (/api/v1) or the action form instead",
                },
            )
            return
        client = scope.get("client")
        decision = await self.limiter.ahit("web", visitor_key(str(client[0]) if client else None))
        if not decision.allowed:
            await reply_error(
                send,
                429,
                {
                    "code": "rate_limited",
                    "message": f"too many actions on the website in a short time; "
                    f"wait {decision.retry_after_s}s and try again",
                    "retry_after_s": decision.retry_after_s,
                },
                decision.headers(),
            )
            return
        if self.shape is not None and self.shape.checks_body(path):
            body = await _read_body(receive, _MAX_EVENT_BODY)
            refusal = (
                (413, {"code": "too_large", "message": f"website requests are limited to {_MAX_EVENT_BODY} bytes"})
                if body is None
                else self.shape.refuse_post(path, body)
            )
            if refusal is not None:
                log.info("refused POST %s: %s", path, refusal[1]["message"])
                await reply_error(send, *refusal)
                return
            receive = _replay(body or b"", receive)
            if path.rstrip("/") == _PREFIX + "run/predict":  # a play step (gradio_shape.py says why)
                send = _no_server_error(send)
        await self.app(scope, receive, send)


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole request body, or None past `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A `receive` that gives the body read already, then waits on the client's (its disconnect)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replay


def _no_server_error(send: Any) -> Any:
    """A `send` that answers Gradio's 500 on its synchronous route (a function that refused its
    input: inputs of the wrong shape) with a 422 that says so, and passes every other reply."""
    refused = False

    async def guarded(message: dict[str, Any]) -> None:
        nonlocal refused
        if message["type"] == "http.response.start" and message.get("status", 200) >= 500:
            refused = True
            log.info("refused POST %srun/predict: the function refused its inputs", _PREFIX)
            await reply_error(
                send,
                422,
                {"code": "invalid_request", "message": "the inputs do not fit this website function; reload the page"},
            )
            return
        if refused:  # the 500's body: already answered
            return
        await send(message)

    return guarded
