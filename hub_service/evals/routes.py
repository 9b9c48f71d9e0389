"""`/api/v1/envs/{owner}/{name}/leaderboard` and `.../evals`: read an env's standings, submit a run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from hub_service.catalog import service as catalog
from hub_service.db import session_scope
from hub_service.deps import db_session, etag_json
from hub_service.evals import service
from hub_service.evals.schemas import EvalSubmission, Leaderboard, LeaderboardEntry, SubmittedEval

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["evals"])

DB = Annotated[Session, Depends(db_session)]


@router.get("/envs/{owner}/{name}/leaderboard", response_model=Leaderboard, summary="Scored runs of an env, best first")
def get_leaderboard(
    request: Request,
    owner: str,
    name: str,
    db: DB,
    revision: Annotated[
        str | None, Query(max_length=64, description="Only runs of this revision (sha or 7+ digit prefix)")
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=200, description="Entries at most (the random baseline is always added)")
    ] = 50,
) -> Response:
    env = catalog.get_env(db, owner, name)
    sha = catalog.get_version(db, env, revision).sha if revision else None
    standings, total = service.leaderboard(db, env, sha=sha, limit=limit)
    entries = [LeaderboardEntry.model_validate(s, from_attributes=True) for s in standings]
    return etag_json(request, Leaderboard(env=env.repo_id, revision=sha, total=total, entries=entries))


@router.post(
    "/envs/{owner}/{name}/evals",
    response_model=SubmittedEval,
    status_code=201,
    summary="Submit a scored run (needs a Hugging Face token)",
)
def submit_eval(
    request: Request, owner: str, name: str, body: EvalSubmission, authorization: Annotated[str | None, Header()] = None
) -> SubmittedEval:
    settings = request.app.state.settings
    user = service.user_of_token(settings.hf_endpoint, authorization)
    with session_scope(request.app.state.sessionmaker) as session:
        env = catalog.get_env(session, owner, name)
        version = service.passed_version(session, env, body.revision)
        row = service.record_eval(
            session,
            env,
            version,
            source="cli",
            model=body.model,
            returns=body.returns,
            endpoint=body.base_url,
            submitted_by=user,
        )
        return SubmittedEval(
            id=row.id,
            env=env.repo_id,
            model=row.model,
            source=row.source,
            endpoint_host=row.endpoint_host,
            submitted_by=row.submitted_by,
            revision=row.sha,
            episodes=row.episodes,
            mean_return=row.mean_return,
            ci_low=row.ci_low,
            ci_high=row.ci_high,
            created_at=row.created_at,
            leaderboard=f"/api/v1/envs/{env.repo_id}/leaderboard",
        )
