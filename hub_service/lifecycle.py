"""The one module that moves an `EnvVersion`: its legal transitions, the audit trail, the listeners.

Every state change of a revision goes through `move` (and a yank through `yank` / `unyank`):
it refuses a move the table below does not allow, sets the fields that go with the new state,
makes a finished main revision the env's verdict, writes the audit event, and tells the
listeners that the Hub's assembly (`hub_service.assembly`) registered at start-up.

    queued ──> running ──> passed | failed | cancelled
      ^           │ └────> waiting ──> running (claimed again)
      │           └──────> queued (its worker died; claimed again)
      └── passed | failed | cancelled | waiting (re-run, re-checked)

Audited: every move into passed, failed or cancelled; into waiting when the reason is new; and
a move into queued that a person asked for (a maintainer's re-run). The system's own claims and
re-queues are not events of their own: the indexer's `revision`, the bot's `pr_checked` and the
stages' events already say them.

Listeners run either inside the mover's transaction (they may write rows: the pull-request bot
queues its report) or after it commits (slow work outside the database: removing old images).
A failing after-commit listener is logged and never undoes the move.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from hub_service.audit.models import EnvEvent
from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.catalog.states import EnvStatus, VersionState
from hub_service.db import utcnow
from hub_service.errors import Conflict

__all__ = [
    "FINISHED",
    "LEGAL",
    "IllegalTransition",
    "Transition",
    "can_move",
    "forget",
    "listen",
    "move",
    "unyank",
    "yank",
]

log = logging.getLogger("hub_service.lifecycle")

S = VersionState
FINISHED = frozenset({S.PASSED, S.FAILED, S.CANCELLED})

# from -> the states it may move to. Anything else raises IllegalTransition.
LEGAL: dict[VersionState, frozenset[VersionState]] = {
    S.QUEUED: frozenset({S.RUNNING, S.QUEUED, S.FAILED, S.CANCELLED}),  # queued again: a lost job replaced
    # queued: its worker died; running: its job, given back after a transient error, is claimed again
    S.RUNNING: frozenset({S.PASSED, S.FAILED, S.WAITING, S.CANCELLED, S.QUEUED, S.RUNNING}),
    S.WAITING: frozenset({S.RUNNING, S.WAITING, S.QUEUED, S.FAILED, S.CANCELLED}),  # waiting: for a new reason
    S.PASSED: frozenset({S.QUEUED}),  # a maintainer's re-run
    S.FAILED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED}),  # a pull request reopened, or main came back to its sha
}


class IllegalTransition(Conflict):
    """A version was asked to move where the lifecycle does not allow (a bug of the caller's)."""


@dataclass(frozen=True)
class Transition:
    """One move, as plain values (after-commit listeners run when the rows are no longer loaded)."""

    env_id: int
    version_id: int
    sha: str
    ref: str
    builder: str | None
    before: VersionState
    after: VersionState
    cause: str


InTransaction = Callable[[Session, EnvRecord, EnvVersion, Transition], None]
AfterCommit = Callable[[Session, Transition], None]


@dataclass(frozen=True)
class _Listener:
    on: frozenset[VersionState]
    in_transaction: InTransaction | None
    after_commit: AfterCommit | None


_listeners: dict[str, _Listener] = {}
_PENDING = "hub_service.lifecycle.after_commit"  # key in Session.info: transitions waiting for the commit


def listen(
    name: str,
    *,
    on: frozenset[VersionState] | set[VersionState],
    in_transaction: InTransaction | None = None,
    after_commit: AfterCommit | None = None,
) -> None:
    """Register (or replace: assembling twice is harmless) the listener `name` for moves into `on`.

    `after_commit(session, transition)` gets the committed session only to find its database
    (`session.get_bind()`); it must not use it for SQL.
    """
    _listeners[name] = _Listener(frozenset(on), in_transaction, after_commit)


def forget(name: str) -> None:
    """Unregister the listener `name` (no error if it is not registered)."""
    _listeners.pop(name, None)


def can_move(before: str, after: str) -> bool:
    return VersionState(after) in LEGAL[VersionState(before)]


def move(
    session: Session,
    env: EnvRecord,
    version: EnvVersion,
    to: VersionState,
    *,
    cause: str,
    actor: str = "hub",
    failure_stage: str | None = None,
    failure_reason: str | None = None,
    failure_code: str | None = None,
    waiting_code: str | None = None,
    waiting_reason: str | None = None,
    **details: Any,
) -> EnvEvent | None:
    """Move `version` (of `env`) to `to` in the caller's transaction; returns the audit event, if any.

    Args:
        cause: why, in the words of the audit trail ("pipeline job 12 (attempt 1)", "maintainer ...").
        actor: "hub", or the person who asked (their moves into queued are audited).
        failure_stage, failure_reason: for `failed`; failure_code: the wait code of a revision that gave up
            waiting for the infrastructure.
        waiting_code, waiting_reason: for `waiting` (a `WaitCode` and what the infrastructure said).
        details: more for the audit event.

    Raises:
        IllegalTransition: the table does not allow this move.
    """
    before, to = VersionState(version.state), VersionState(to)
    if to not in LEGAL[before]:
        raise IllegalTransition(
            f"{version.sha[:12]} ({version.ref}) cannot go from {before} to {to}; the lifecycle allows "
            f"{', '.join(sorted(LEGAL[before])) or 'nothing'}",
            sha=version.sha,
            state=str(before),
        )
    version.state = to
    new_wait = False
    if to is S.QUEUED:
        version.finished_at = None
    elif to is S.WAITING:
        new_wait = version.waiting_code != waiting_code or version.waiting_since is None
        if new_wait:
            version.waiting_since = utcnow()
        version.waiting_code, version.waiting_reason = waiting_code, waiting_reason
        if env.sha == version.sha and version.ref == "main" and env.status == EnvStatus.PENDING:
            env.status = EnvStatus.WAITING
    elif to in FINISHED:
        version.finished_at = utcnow()
        if to is not S.CANCELLED:
            version.waiting_code = version.waiting_reason = version.waiting_since = None
        if to is S.FAILED:
            version.failure_stage, version.failure_reason = failure_stage, (failure_reason or "")[:4000]
            version.failure_code = failure_code
        if to is not S.CANCELLED and env.sha == version.sha:
            apply_verdict(env, version)  # a finished main revision that is the env's current one
    event = _audit(session, env, version, before, to, new_wait, cause=cause, actor=actor, **details)
    _notify(
        session,
        env,
        version,
        Transition(env.id, version.id, version.sha, version.ref, version.builder, before, to, cause),
    )
    return event


def yank(session: Session, env: EnvRecord, version: EnvVersion, *, reason: str, actor: str, cause: str) -> EnvEvent:
    """Yank a revision: resolve refuses it unless it is asked for by sha.

    Raises:
        Conflict: it is yanked already.
    """
    if version.yanked:
        raise Conflict(f"{env.repo_id}@{version.sha[:12]} is already yanked ({version.yank_reason})")
    version.yanked, version.yank_reason = True, reason
    return record(
        session, env, "yanked", f"{version.sha[:12]} yanked: {reason}", cause=cause, actor=actor, version=version
    )


def unyank(session: Session, env: EnvRecord, version: EnvVersion, *, actor: str, cause: str) -> EnvEvent:
    """Make a yanked revision usable again.

    Raises:
        Conflict: it is not yanked.
    """
    if not version.yanked:
        raise Conflict(f"{env.repo_id}@{version.sha[:12]} is not yanked")
    version.yanked, version.yank_reason = False, None
    return record(
        session, env, "unyanked", f"{version.sha[:12]} is usable again", cause=cause, actor=actor, version=version
    )


def _audit(
    session: Session,
    env: EnvRecord,
    version: EnvVersion,
    before: VersionState,
    to: VersionState,
    new_wait: bool,
    *,
    cause: str,
    actor: str,
    **details: Any,
) -> EnvEvent | None:
    where = f"{version.sha[:12]} ({version.ref})"
    if to is S.PASSED:
        summary = f"{where} passed every stage"
    elif to is S.FAILED:
        summary = f"{where} failed at {version.failure_stage}: {(version.failure_reason or '')[:300]}"
    elif to is S.CANCELLED:
        summary = f"{where} was cancelled"
    elif to is S.WAITING and new_wait:
        summary = (
            f"{where} waits for the infrastructure ({version.waiting_code}): {(version.waiting_reason or '')[:300]}"
        )
        details.setdefault("waiting_code", version.waiting_code)
        return record(session, env, "waiting", summary, cause=cause, actor=actor, version=version, **details)
    elif to is S.QUEUED and actor != "hub":
        summary = details.pop("summary", None) or f"{version.sha[:12]} queued for the pipeline again (was {before})"
        details.setdefault("previous", str(before))
        return record(session, env, "queued", summary, cause=cause, actor=actor, version=version, **details)
    else:
        return None
    details.setdefault("failure_stage", version.failure_stage)
    return record(session, env, str(to), summary, cause=cause, actor=actor, version=version, **details)


def _notify(session: Session, env: EnvRecord, version: EnvVersion, moved: Transition) -> None:
    for name, listener in list(_listeners.items()):
        if moved.after not in listener.on:
            continue
        if listener.in_transaction is not None:
            listener.in_transaction(session, env, version, moved)
        if listener.after_commit is not None:
            session.info.setdefault(_PENDING, []).append((name, listener.after_commit, moved))
            if not event.contains(session, "after_commit", _after_commit):
                event.listen(session, "after_commit", _after_commit)
                event.listen(session, "after_soft_rollback", _forget_pending)


def _after_commit(session: Session) -> None:
    pending = session.info.pop(_PENDING, [])
    for name, fn, moved in pending:
        try:
            fn(session, moved)
        except Exception:  # the move is committed; the listener's own work can wait for the next move
            log.warning(
                "listener %s failed after %s -> %s of version %s",
                name,
                moved.before,
                moved.after,
                moved.version_id,
                exc_info=True,
            )


def _forget_pending(session: Session, previous_transaction: Any) -> None:
    session.info.pop(_PENDING, None)
