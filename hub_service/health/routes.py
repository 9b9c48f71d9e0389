"""`GET /api/v1/envs/{owner}/{name}/health`: runtime health now and its history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from hub_service.deps import db_session, etag_json
from hub_service.health.service import HealthView, env_health

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["health"])


@router.get("/envs/{owner}/{name}/health", response_model=HealthView, summary="Runtime health and its transitions")
def health(
    request: Request,
    owner: str,
    name: str,
    db: Annotated[Session, Depends(db_session)],
    limit: Annotated[int, Query(ge=1, le=1000, description="Transitions to return")] = 100,
) -> Response:
    return etag_json(request, env_health(db, owner, name, limit=limit))
