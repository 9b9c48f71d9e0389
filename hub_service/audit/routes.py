"""`GET /api/v1/envs/{owner}/{name}/events`: an environment's audit trail."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from hub_service.audit.models import EVENT_KINDS
from hub_service.audit.service import list_events
from hub_service.catalog.service import get_env
from hub_service.deps import db_session, etag_json

__all__ = ["EventPage", "EventView", "router"]

router = APIRouter(prefix="/api/v1", tags=["audit"])


class EventView(BaseModel):
    id: int
    kind: str = Field(description=", ".join(EVENT_KINDS))
    summary: str
    cause: str = Field(description="What made it happen")
    actor: str = Field(description='"hub", or the maintainer who acted')
    sha: str | None = None
    ref: str | None = None
    details: dict[str, Any] = {}
    created_at: dt.datetime


class EventPage(BaseModel):
    items: list[EventView]
    next_before: int | None = Field(default=None, description="Pass as `before` for the next (older) page")


@router.get("/envs/{owner}/{name}/events", response_model=EventPage, summary="The env's audit trail, newest first")
def events(
    request: Request,
    owner: str,
    name: str,
    db: Annotated[Session, Depends(db_session)],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="Only events older than this id")] = None,
    kind: Annotated[list[str], Query(description="Only these kinds (repeatable)")] = [],  # noqa: B006 - FastAPI reads it
) -> Response:
    env = get_env(db, owner, name)
    rows, next_before = list_events(db, env, limit=limit, before=before, kinds=kind)
    page = EventPage(items=[EventView.model_validate(r, from_attributes=True) for r in rows], next_before=next_before)
    return etag_json(request, page)
