"""What else happens when a version changes state: the audit trail, and the pull-request bot."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion

__all__ = ["stage_passed", "version_finished", "version_waiting"]


def stage_passed(
    session: Session, env_id: int, version: EnvVersion, kind: str, summary: str, *, cause: str, **details: Any
) -> None:
    """A stage passed (kind: validated, built, smoke_tested): one audit event."""
    record(session, env_id, kind, summary, cause=cause, version=version, **details)


def version_waiting(session: Session, env: EnvRecord, version: EnvVersion, *, cause: str) -> None:
    """`version` began to wait for the infrastructure (or waits for another reason now): one event."""
    record(
        session,
        env,
        "waiting",
        f"{version.sha[:12]} ({version.ref}) waits for the infrastructure ({version.waiting_code}): "
        f"{(version.waiting_reason or '')[:300]}",
        cause=cause,
        version=version,
        waiting_code=version.waiting_code,
    )


def version_finished(session: Session, env: EnvRecord, version: EnvVersion, *, cause: str) -> None:
    """`version` reached passed, failed or cancelled (in the caller's transaction): record it, and
    queue a report for every open pull request whose head it is."""
    where = f"{version.sha[:12]} ({version.ref})"
    if version.state == "passed":
        summary = f"{where} passed every stage"
    elif version.state == "failed":
        summary = f"{where} failed at {version.failure_stage}: {(version.failure_reason or '')[:300]}"
    else:
        summary = f"{where} was {version.state}"
    kind = version.state if version.state in ("passed", "failed", "cancelled") else "failed"
    record(session, env, kind, summary, cause=cause, version=version, failure_stage=version.failure_stage)
    from hub_service.prbot.service import version_finished as notify_bot

    notify_bot(session, env, version)
