"""`GET /api/v1/envs/{owner}/{name}/pulls`: the pull requests the bot checks, and their verdicts."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog.models import EnvVersion
from hub_service.catalog.service import get_env
from hub_service.deps import db_session, etag_json
from hub_service.prbot.models import PullRequestCheck

__all__ = ["PullCheck", "PullChecks", "router"]

router = APIRouter(prefix="/api/v1", tags=["pull requests"])


class PullCheck(BaseModel):
    num: int
    ref: str
    status: str = Field(
        description="open, draft, closed, merged (as the Hub said at the last sync); deleted when the Hub no longer has it"
    )
    title: str | None = None
    head_sha: str | None = None
    state: str | None = Field(default=None, description="The head's check: queued, running, passed, failed, cancelled")
    failure_stage: str | None = None
    commented: bool = Field(description="Whether the bot's comment is on the pull request")
    updated_at: dt.datetime


class PullChecks(BaseModel):
    items: list[PullCheck]


@router.get(
    "/envs/{owner}/{name}/pulls", response_model=PullChecks, summary="Pull requests checked by the bot, newest first"
)
def pulls(request: Request, owner: str, name: str, db: Annotated[Session, Depends(db_session)]) -> Response:
    env = get_env(db, owner, name)
    rows = db.execute(
        select(PullRequestCheck, EnvVersion)
        .outerjoin(EnvVersion, EnvVersion.id == PullRequestCheck.version_id)
        .where(PullRequestCheck.env_id == env.id)
        .order_by(PullRequestCheck.num.desc())
        .limit(200)
    ).all()
    items = [
        PullCheck(
            num=c.num,
            ref=f"refs/pr/{c.num}",
            status=c.status,
            title=c.title,
            head_sha=c.head_sha,
            state=v.state if v else None,
            failure_stage=v.failure_stage if v else None,
            commented=c.comment_id is not None,
            updated_at=c.updated_at,
        )
        for c, v in rows
    ]
    return etag_json(request, PullChecks(items=items))
