"""`/api/v1/locks`: register a lock file (its images are then kept) and look one up."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Response
from sqlalchemy.orm import Session

from hub_service.catalog.lock_models import ImageLock
from hub_service.deps import db_session, hub_settings
from hub_service.errors import NotFound, Unauthorized
from hub_service.evals.service import user_of_token
from hub_service.locks import service
from hub_service.locks.schemas import LockView
from hub_service.settings import HubSettings

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["locks"])
DB = Annotated[Session, Depends(db_session)]
Settings = Annotated[HubSettings, Depends(hub_settings)]


def _view(row: ImageLock) -> LockView:
    envs = row.document.get("envs", {}) if isinstance(row.document, dict) else {}
    return LockView(
        id=row.id,
        envs=[f"{name}@{entry.get('revision')}" for name, entry in sorted(envs.items())],
        created_at=row.created_at,
        expires_at=row.expires_at,
        renewed_at=row.renewed_at,
        owner=row.owner,
    )


@router.post(
    "/locks",
    response_model=LockView,
    status_code=201,
    summary="Register a lock file: keep the images it names (201 new, 200 renewed; needs a Hugging Face token)",
)
def register(
    response: Response,
    db: DB,
    settings: Settings,
    document: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header(max_length=600)] = None,
) -> LockView:
    if not authorization:
        raise Unauthorized(
            "registering a lock keeps images for everyone, so it needs your Hugging Face token: send "
            "`Authorization: Bearer hf_...` (`openenv lock` sends --token or HF_TOKEN)"
        )
    owner = user_of_token(settings.hf_endpoint, authorization)
    row, created = service.register(
        db, document, settings.lock_ttl_days, owner=owner, max_per_owner=settings.lock_max_per_user
    )
    view = _view(row)
    db.commit()
    if not created:
        response.status_code = 200
    return view


@router.get("/locks/{lock_id}", response_model=LockView, summary="A registered lock and until when it lives")
def get_lock(lock_id: Annotated[str, Path(max_length=64)], db: DB) -> LockView:
    row = db.get(ImageLock, lock_id)
    if row is None:
        raise NotFound(f"this Hub holds no lock {lock_id}; register it with `openenv lock`")
    return _view(row)
