"""Abuse limits: request body size, and rate limits per client with RateLimit headers and 429.

A token bucket per (client, category): `capacity` requests at once, refilled at `per_minute`.
Replies carry `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds until the
bucket is full again); a refused request gets 429 with `Retry-After`. `RateLimiter` keeps its
buckets in this process's memory; the service uses `hub_service.quota.SharedRateLimiter`, whose
buckets live in the database, so that every API process behind a proxy counts the same. The client is the connection's address as the server reports it: `openenv hub serve`
lets uvicorn take it from `X-Forwarded-For` only when told the service sits behind a proxy
(`OPENENV_HUB_TRUST_FORWARDED_FOR`), so a client cannot pick its own identity.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "LimitsMiddleware", "RateLimiter", "client_key"]

_MAX_CLIENTS = 100_000  # buckets kept per category (least recently used ones are dropped)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_s: int
    retry_after_s: int = 0

    def headers(self) -> list[tuple[bytes, bytes]]:
        out = [
            (b"ratelimit-limit", str(self.limit).encode()),
            (b"ratelimit-remaining", str(self.remaining).encode()),
            (b"ratelimit-reset", str(self.reset_s).encode()),
        ]
        if not self.allowed:
            out.append((b"retry-after", str(self.retry_after_s).encode()))
        return out


class RateLimiter:
    """Token buckets per (category, client). Thread-safe; O(1) per request."""

    def __init__(self, rules: dict[str, tuple[int, float]]) -> None:
        """`rules`: category → (capacity, refill per minute)."""
        self.rules = rules
        self._buckets: dict[str, OrderedDict[str, tuple[float, float]]] = {c: OrderedDict() for c in rules}
        self._lock = threading.Lock()

    def hit(self, category: str, client: str, cost: float = 1.0) -> Decision:
        capacity, per_minute = self.rules[category]
        rate = per_minute / 60.0
        now = time.monotonic()
        with self._lock:
            buckets = self._buckets[category]
            tokens, stamp = buckets.pop(client, (float(capacity), now))
            tokens = min(capacity, tokens + (now - stamp) * rate)
            allowed = tokens >= cost
            if allowed:
                tokens -= cost
            buckets[client] = (tokens, now)
            if len(buckets) > _MAX_CLIENTS:
                buckets.popitem(last=False)
        reset = math.ceil((capacity - tokens) / rate) if rate > 0 else 0
        retry = math.ceil((cost - tokens) / rate) if not allowed and rate > 0 else 0
        return Decision(allowed, capacity, int(tokens), reset, max(retry, 1) if not allowed else 0)

    async def ahit(self, category: str, client: str, cost: float = 1.0) -> Decision:
        """`hit` for async code (memory only: nothing to wait for)."""
        return self.hit(category, client, cost)


def client_key(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class LimitsMiddleware:
    """ASGI middleware: body size cap for every request, rate limits for the paths in `routes`,
    and a 400 for a NUL character in the path or query (no name or parameter may hold one).

    Args:
        limiter: a `RateLimiter` or `hub_service.quota.SharedRateLimiter` (anything with `ahit`).
        routes: (path prefix, category) pairs, first match wins; unmatched paths are not rate limited.
        max_body_bytes: larger bodies get 413 (by Content-Length, or while streaming).
    """

    def __init__(self, app: Any, limiter: RateLimiter, routes: list[tuple[str, str]], max_body_bytes: int) -> None:
        self.app = app
        self.limiter = limiter
        self.routes = routes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers") or []:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                await reply_error(
                    send,
                    413,
                    {"code": "too_large", "message": f"request bodies are limited to {self.max_body_bytes} bytes"},
                )
                return
        path = scope.get("path", "")
        query = scope.get("query_string", b"")
        if "\x00" in path or b"\x00" in query or b"%00" in query.lower():
            # No name, tag or revision holds a NUL; PostgreSQL cannot even compare one.
            await reply_error(
                send,
                400,
                {
                    "code": "invalid_request",
                    "message": "NUL characters (%00) are not allowed in paths or query parameters",
                },
            )
            return
        category = next((c for prefix, c in self.routes if path.startswith(prefix)), None)
        decision = await self.limiter.ahit(category, client_key(scope)) if category else None
        if decision is not None and not decision.allowed:
            await reply_error(
                send,
                429,
                {
                    "code": "rate_limited",
                    "message": f"too many requests; retry in {decision.retry_after_s}s",
                    "retry_after_s": decision.retry_after_s,
                },
                decision.headers(),
            )
            return

        received = 0

        async def limited_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _TooLarge
            return message

        async def send_with_headers(message: dict[str, Any]) -> None:
            if decision is not None and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *decision.headers()]}
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_headers)
        except _TooLarge:
            await reply_error(
                send,
                413,
                {"code": "too_large", "message": f"request bodies are limited to {self.max_body_bytes} bytes"},
            )


class _TooLarge(Exception):
    pass


async def reply_error(
    send: Any, status: int, error: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer an ASGI request with the Hub's JSON error shape (`{"error": {"code", "message"}}`)."""
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
