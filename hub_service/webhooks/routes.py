"""`POST /webhooks/hf`: the Hugging Face Hub's webhooks (repo and discussion domains)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from hub_service.webhooks import service

__all__ = ["router"]

router = APIRouter(tags=["webhooks"])


@router.post(
    "/webhooks/hf",
    status_code=202,
    summary="Receive a Hugging Face Hub webhook",
    responses={
        200: {"description": "a duplicate, or nothing to do"},
        202: {"description": "work queued"},
        401: {"description": "no X-Webhook-Secret"},
        403: {"description": "wrong secret"},
        413: {"description": "body too large"},
        422: {"description": "not a webhook payload"},
    },
)
async def receive(request: Request, x_webhook_secret: Annotated[str | None, Header()] = None) -> JSONResponse:
    settings = request.app.state.settings
    service.check_secret(settings, x_webhook_secret)  # before reading the body: strangers get nothing
    payload, key = service.parse(await request.body())
    accepted = await run_in_threadpool(service.receive, request.app.state.sessionmaker, settings, payload, key)
    return JSONResponse(accepted.body(), status_code=202 if accepted.status == "queued" else 200)
