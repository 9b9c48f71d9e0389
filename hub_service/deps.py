"""FastAPI dependencies shared by the routers: database sessions, settings, ETag replies."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from hub_service.settings import HubSettings

__all__ = ["db_session", "etag_json", "hub_settings"]


def db_session(request: Request) -> Iterator[Session]:
    """A session for one request (read-mostly; writers commit explicitly)."""
    with request.app.state.sessionmaker() as session:
        yield session


def hub_settings(request: Request) -> HubSettings:
    return request.app.state.settings


def etag_json(request: Request, payload: BaseModel | dict[str, Any], max_age: int = 0) -> Response:
    """A JSON reply with a strong ETag; `304 Not Modified` when the client already has it."""
    body = payload.model_dump_json().encode() if isinstance(payload, BaseModel) else _dumps(payload)
    tag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    headers = {"ETag": tag, "Cache-Control": f"public, max-age={max_age}" if max_age else "no-cache"}
    if tag in _if_none_match(request):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _if_none_match(request: Request) -> set[str]:
    raw = request.headers.get("if-none-match", "")
    return {t.strip().removeprefix("W/") for t in raw.split(",") if t.strip()}


def _dumps(payload: dict[str, Any]) -> bytes:
    import orjson

    return orjson.dumps(payload)
