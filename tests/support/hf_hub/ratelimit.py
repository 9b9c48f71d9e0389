"""The Hub API's rate limit, as a crawl meets it: after some requests to a path, a 429 with
`Retry-After` and the IETF `RateLimit` / `RateLimit-Policy` headers the Hub sends (the ones
`huggingface_hub.utils.parse_ratelimit_headers` reads), for as many requests as the test says.

    hub.throttle("/api/spaces", after=2, times=3, retry_after=1)   # requests 3, 4 and 5 get 429
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

__all__ = ["Throttle", "add_rate_limits"]

_WINDOW_S = 300  # the Hub's policy window, as its RateLimit-Policy header states it


@dataclass
class _Plan:
    path: str
    after: int  # requests still served before the refusals start
    times: int  # refusals still to come
    retry_after: int
    status: int


class Throttle:
    """The refusals planned for the stand-in's paths (one plan per path, the latest wins)."""

    def __init__(self) -> None:
        self._plans: dict[str, _Plan] = {}
        self._lock = threading.Lock()
        self.refused = 0

    def plan(self, path: str, *, after: int, times: int, retry_after: int, status: int = 429) -> None:
        with self._lock:
            self._plans[path] = _Plan(path, after, times, retry_after, status)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def refusal(self, method: str, path: str) -> Response | None:
        """The 429 (or other status) this request gets, or None when it is served."""
        with self._lock:
            plan = self._plans.get(path)
            if method != "GET" or plan is None or plan.times <= 0:
                return None
            if plan.after > 0:
                plan.after -= 1
                return None
            plan.times -= 1
            self.refused += 1
            wait = plan.retry_after
        message = (
            f"You have exceeded our rate limit for 'api' requests; retry in {wait} seconds"
            if plan.status == 429
            else f"The request cannot be served now (HTTP {plan.status})"
        )
        headers = {
            "Retry-After": str(wait),
            "RateLimit": f'"api";r=0;t={wait}',
            "RateLimit-Policy": f'"fixed window";"api";q=500;w={_WINDOW_S}',
            "X-Error-Message": message,
        }
        return JSONResponse({"error": message}, status_code=plan.status, headers=headers)


def add_rate_limits(app: FastAPI) -> Throttle:
    """Put a `Throttle` in front of `app`'s routes (as `app.state.throttle`); returns it."""
    throttle = Throttle()
    app.state.throttle = throttle

    @app.middleware("http")
    async def _rate_limit(request: Request, call_next: Any) -> Response:
        refused = throttle.refusal(request.method, request.url.path)
        return refused if refused is not None else await call_next(request)

    return throttle
