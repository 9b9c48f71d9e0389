"""Maintainer actions (bearer token): re-run, yank/unyank a revision, deprecate/undeprecate an env."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from pydantic import BaseModel, Field, field_validator

from hub_service.audit.routes import EventView
from hub_service.catalog.schemas import EnvSummary, VersionSummary
from hub_service.catalog.service import summary, version_summary
from hub_service.db import session_scope
from hub_service.maintainers import service

__all__ = ["router"]


def maintainer(request: Request, authorization: Annotated[str | None, Header()] = None) -> None:
    service.check_token(request.app.state.settings, authorization)


router = APIRouter(prefix="/api/v1", tags=["maintainers"], dependencies=[Depends(maintainer)])


class Action(BaseModel):
    actor: str = Field(min_length=1, max_length=128, description="Who acts (recorded in the audit trail)")
    reason: str = Field(min_length=3, max_length=2000, description="Why (recorded in the audit trail)")

    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: object) -> object:
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("NUL characters are not allowed")
        return value


class Deprecation(Action):
    successor: str | None = Field(default=None, max_length=200, description="owner/name of the env to use instead")


class VersionAction(BaseModel):
    version: VersionSummary
    event: EventView


class EnvAction(BaseModel):
    env: EnvSummary
    event: EventView


def _version_reply(version: object, event: object) -> VersionAction:
    return VersionAction(version=version_summary(version), event=EventView.model_validate(event, from_attributes=True))  # type: ignore[arg-type]


@router.post(
    "/envs/{owner}/{name}/versions/{revision}/rerun",
    response_model=VersionAction,
    status_code=202,
    summary="Run the pipeline on a revision again",
)
def rerun(request: Request, owner: str, name: str, revision: str, body: Action) -> VersionAction:
    with session_scope(request.app.state.sessionmaker) as session:
        version, event = service.rerun(
            session, request.app.state.settings, owner, name, revision, actor=body.actor, reason=body.reason
        )
        session.flush()
        return _version_reply(version, event)


@router.post("/envs/{owner}/{name}/versions/{revision}/yank", response_model=VersionAction, summary="Yank a revision")
def yank(request: Request, owner: str, name: str, revision: str, body: Action) -> VersionAction:
    with session_scope(request.app.state.sessionmaker) as session:
        version, event = service.yank(session, owner, name, revision, actor=body.actor, reason=body.reason)
        session.flush()
        return _version_reply(version, event)


@router.post("/envs/{owner}/{name}/versions/{revision}/unyank", response_model=VersionAction, summary="Undo a yank")
def unyank(request: Request, owner: str, name: str, revision: str, body: Action) -> VersionAction:
    with session_scope(request.app.state.sessionmaker) as session:
        version, event = service.unyank(session, owner, name, revision, actor=body.actor, reason=body.reason)
        session.flush()
        return _version_reply(version, event)


@router.post(
    "/envs/{owner}/{name}/deprecate", response_model=EnvAction, summary="Deprecate an env, pointing at its successor"
)
def deprecate(request: Request, owner: str, name: str, body: Deprecation) -> EnvAction:
    with session_scope(request.app.state.sessionmaker) as session:
        env, event = service.deprecate(
            session, owner, name, successor=body.successor, actor=body.actor, reason=body.reason
        )
        session.flush()
        return EnvAction(env=summary(env), event=EventView.model_validate(event, from_attributes=True))


@router.post("/envs/{owner}/{name}/undeprecate", response_model=EnvAction, summary="Undo a deprecation")
def undeprecate(request: Request, owner: str, name: str, body: Action) -> EnvAction:
    with session_scope(request.app.state.sessionmaker) as session:
        env, event = service.undeprecate(session, owner, name, actor=body.actor, reason=body.reason)
        session.flush()
        return EnvAction(env=summary(env), event=EventView.model_validate(event, from_attributes=True))
