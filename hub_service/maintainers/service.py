"""Maintainer actions: re-run the pipeline on a revision, yank and unyank it, deprecate an env.

Each action changes the catalog and appends an audit event naming the maintainer and the reason,
in one transaction.
"""

from __future__ import annotations

import hmac

from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service import lifecycle
from hub_service.audit.models import EnvEvent
from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import get_env, get_version
from hub_service.catalog.states import VersionState
from hub_service.errors import Conflict, Forbidden, InvalidRequest, Unauthorized
from hub_service.queue import jobs
from hub_service.queue.kinds import JobKind, JobState
from hub_service.queue.models import Job
from hub_service.settings import HubSettings

__all__ = ["check_token", "deprecate", "rerun", "rerun_failed", "undeprecate", "unyank", "yank"]

PRIORITY_RERUN = 40


def check_token(settings: HubSettings, authorization: str | None) -> None:
    """Check `Authorization: Bearer <token>` against the maintainer token in constant time.

    Raises:
        Unauthorized: no bearer token was sent.
        Forbidden: the token is wrong, or maintainer actions are not enabled.
    """
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized(
            "maintainer actions need `Authorization: Bearer <token>` (the service's OPENENV_HUB_MAINTAINER_TOKEN)"
        )
    if settings.maintainer_token is None:
        raise Forbidden("maintainer actions are not enabled on this service: set OPENENV_HUB_MAINTAINER_TOKEN")
    expected = settings.maintainer_token.get_secret_value().encode("utf-8")
    if not hmac.compare_digest(token.strip().encode("utf-8", "surrogateescape"), expected):
        raise Forbidden("the maintainer token is not valid")


def _version(session: Session, owner: str, name: str, revision: str) -> tuple[EnvRecord, EnvVersion]:
    env = get_env(session, owner, name)
    return env, get_version(session, env, None if revision in ("latest", "main") else revision)


def rerun(
    session: Session, settings: HubSettings, owner: str, name: str, revision: str, *, actor: str, reason: str
) -> tuple[EnvVersion, EnvEvent]:
    """Queue the pipeline again for a revision; one that waits for the infrastructure runs now.

    Raises:
        Conflict: a run of that revision is already queued or running.
    """
    env, version = _version(session, owner, name, revision)
    return _rerun(session, settings, env, version, actor=actor, reason=reason)


def rerun_failed(
    session: Session, settings: HubSettings, *, actor: str, reason: str
) -> list[tuple[EnvVersion, EnvEvent]]:
    """Re-run every env whose current main revision failed or waits for the infrastructure (envs
    the source still lists); returns what was queued."""
    current = (
        select(EnvVersion, EnvRecord)
        .join(EnvRecord, EnvRecord.id == EnvVersion.env_id)
        .where(
            EnvRecord.gone.is_(False),
            EnvVersion.ref == "main",
            EnvVersion.sha == EnvRecord.sha,
            EnvVersion.state.in_((VersionState.FAILED, VersionState.WAITING)),
        )
        .order_by(EnvRecord.owner, EnvRecord.name)
    )
    return [
        _rerun(session, settings, env, version, actor=actor, reason=reason)
        for version, env in session.execute(current).all()
    ]


def _rerun(
    session: Session, settings: HubSettings, env: EnvRecord, version: EnvVersion, *, actor: str, reason: str
) -> tuple[EnvVersion, EnvEvent]:
    busy = session.scalar(
        select(Job)
        .where(
            Job.version_id == version.id,
            Job.kind == JobKind.PIPELINE,
            Job.state.in_((JobState.QUEUED, JobState.RUNNING)),
        )
        .limit(1)
    )
    if busy is not None and version.state == VersionState.WAITING and busy.state == JobState.QUEUED:
        busy.run_after, busy.infra_retries = None, 0
        busy.infra_waits, busy.first_waited_at = 0, None  # an operator's rerun starts the wait caps afresh
        event = record(
            session,
            env,
            "queued",
            f"{version.sha[:12]} runs again now (it waited for the infrastructure: {version.waiting_code})",
            cause=f"maintainer {actor}: {reason}",
            actor=actor,
            version=version,
            job=busy.id,
            previous=version.state,
        )
        return version, event
    if busy is not None:
        raise Conflict(
            f"{env.repo_id}@{version.sha[:12]} is already queued or running (job {busy.id}); wait for it to finish",
            job=busy.id,
        )
    job = jobs.enqueue(session, version.id, priority=PRIORITY_RERUN, max_attempts=settings.job_max_attempts)
    session.flush()
    queued = lifecycle.move(
        session, env, version, VersionState.QUEUED, cause=f"maintainer {actor}: {reason}", actor=actor, job=job.id
    )
    assert queued is not None  # a person's re-run is always in the trail
    return version, queued


def yank(
    session: Session, owner: str, name: str, revision: str, *, actor: str, reason: str
) -> tuple[EnvVersion, EnvEvent]:
    """Yank a revision: resolve refuses it unless it is asked for by sha."""
    env, version = _version(session, owner, name, revision)
    event = lifecycle.yank(session, env, version, reason=reason, actor=actor, cause=f"maintainer {actor}: {reason}")
    return version, event


def unyank(
    session: Session, owner: str, name: str, revision: str, *, actor: str, reason: str
) -> tuple[EnvVersion, EnvEvent]:
    env, version = _version(session, owner, name, revision)
    event = lifecycle.unyank(session, env, version, actor=actor, cause=f"maintainer {actor}: {reason}")
    return version, event


def deprecate(
    session: Session, owner: str, name: str, *, successor: str | None, actor: str, reason: str
) -> tuple[EnvRecord, EnvEvent]:
    """Mark an env deprecated, pointing at its successor (an env in the catalog).

    Raises:
        InvalidRequest: the successor is the env itself, or not `owner/name`.
        NotFound: the successor is not in the catalog (with close names).
    """
    env = get_env(session, owner, name)
    if successor is not None:
        s_owner, slash, s_name = successor.partition("/")
        if not slash or not s_owner or not s_name or "/" in s_name:
            raise InvalidRequest(f"successor {successor!r} must be an env id, owner/name")
        if (s_owner, s_name) == (env.owner, env.name):
            raise InvalidRequest("an env cannot be its own successor")
        get_env(session, s_owner, s_name)
    env.deprecated, env.deprecation_reason, env.successor = True, reason, successor
    pointer = f"; use {successor} instead" if successor else ""
    event = record(
        session,
        env,
        "deprecated",
        f"{env.repo_id} deprecated{pointer}: {reason}",
        cause=f"maintainer {actor}: {reason}",
        actor=actor,
        successor=successor,
    )
    return env, event


def undeprecate(session: Session, owner: str, name: str, *, actor: str, reason: str) -> tuple[EnvRecord, EnvEvent]:
    env = get_env(session, owner, name)
    if not env.deprecated:
        raise Conflict(f"{env.repo_id} is not deprecated")
    env.deprecated, env.deprecation_reason, env.successor = False, None, None
    event = record(
        session,
        env,
        "undeprecated",
        f"{env.repo_id} is no longer deprecated",
        cause=f"maintainer {actor}: {reason}",
        actor=actor,
    )
    return env, event
