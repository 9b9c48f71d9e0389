"""Limits on the website's own routes (Gradio's `/gradio_api/...`): a rate limit per visitor on the
requests that run something (events, queue joins), and no file uploads, since no component of
the site takes a file (an upload would only sit in Gradio's cache on the service's disk).
"""

from __future__ import annotations

from typing import Any

from hub_service.limits import RateLimiter
from hub_service.quota import SharedRateLimiter

__all__ = ["WebsiteGuard", "visitor_key"]

_PREFIX = "/gradio_api/"


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

    def __init__(self, app: Any, limiter: RateLimiter | SharedRateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(_PREFIX) or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if path.rstrip("/") == _PREFIX + "upload":
            await _reply(
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
            await _reply(
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
        await self.app(scope, receive, send)


async def _reply(
    send: Any, status: int, error: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    import orjson

    body = orjson.dumps({"error": error})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
