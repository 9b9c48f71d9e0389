"""`POST /webhooks/hf`: the Hugging Face Hub's webhooks (repo and discussion domains)."""

from __future__ import annotations

import logging
import re
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from hub_service.webhooks import service

__all__ = ["router"]

router = APIRouter(tags=["webhooks"])


class _RedactSecret(logging.Filter):
    """Keeps a `?secret=` out of the access log (uvicorn logs each request's path and query)."""

    _pattern = re.compile(r"((?:^|[?&])secret=)[^&\s]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self._pattern.sub(r"\1[redacted]", a) if isinstance(a, str) and "secret=" in a else a
                for a in record.args
            )
        return True


_access = logging.getLogger("uvicorn.access")
if not any(isinstance(f, _RedactSecret) for f in _access.filters):
    _access.addFilter(_RedactSecret())


@router.post(
    "/webhooks/hf",
    status_code=202,
    summary="Receive a Hugging Face Hub webhook",
    responses={
        200: {"description": "a duplicate (a replay within seconds), or nothing to do (ignored, with the reason)"},
        202: {"description": "work queued"},
        401: {"description": "no secret (X-Webhook-Secret header or ?secret=)"},
        403: {"description": "wrong secret"},
        413: {"description": "body too large"},
        422: {"description": "not a webhook payload"},
    },
)
async def receive(
    request: Request,
    x_webhook_secret: Annotated[str | None, Header()] = None,
    secret: Annotated[str | None, Query(description="the secret, for a handler URL that carries it")] = None,
) -> JSONResponse:
    settings = request.app.state.settings
    service.check_secret(settings, x_webhook_secret, secret)  # before reading the body: strangers get nothing
    payload, key = service.parse(await request.body())
    accepted = await run_in_threadpool(service.receive, request.app.state.sessionmaker, settings, payload, key)
    return JSONResponse(accepted.body(), status_code=202 if accepted.status == "queued" else 200)
