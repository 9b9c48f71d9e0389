"""The `index_repo` task: index one Space as the Hub has it now (after a webhook said it changed)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord
from hub_service.db import session_scope, utcnow
from hub_service.indexer import source_for
from hub_service.indexer.service import index_one
from hub_service.indexer.sources import HfSource
from hub_service.prbot.service import close_checks
from hub_service.queue.tasks import TaskContext

__all__ = ["ignore_ownerless_move", "index_repo"]

log = logging.getLogger("hub_service.webhooks")


def index_repo(ctx: TaskContext, payload: dict[str, Any]) -> str:
    """Index `payload["repo"]` (and its new name after a move); returns what changed."""
    source = source_for(ctx.settings, "hf")
    assert isinstance(source, HfSource)
    repo, cause = str(payload["repo"]), str(payload.get("cause") or "webhook")
    moved_to = payload.get("moved_to")
    if moved_to and "/" not in str(moved_to):  # queued before the webhook checked for an owner
        with session_scope(ctx.factory) as session:
            ignored = ignore_ownerless_move(session, repo, str(moved_to), cause)
        log.warning("move of %s ignored: %s", repo, ignored)
        return f"{repo}: {ignored}"
    if moved_to:
        refusal = _unconfirmed_move(source, repo, str(moved_to))
        if refusal is not None:  # a payload is a hint, never the truth: nothing moves on its word
            log.warning("move of %s to %s refused: %s", repo, moved_to, refusal)
            return f"{repo}: move to {moved_to} refused: {refusal}"
        with session_scope(ctx.factory) as session:
            _move(session, repo, str(moved_to), cause)
        repo = str(moved_to)
    owner, _, name = repo.partition("/")
    item = source.get(owner, name)  # the truth, whatever sha the payload named
    report = index_one(ctx.factory, source, owner, name, item, max_attempts=ctx.settings.job_max_attempts, cause=cause)
    if item is None:  # deleted, made private or untagged: its pull requests' checks end with it
        with session_scope(ctx.factory) as session:
            closed = close_checks(session, owner, name, cause)
        if closed:
            return f"{repo}: gone {report.gone}, pull request checks closed {closed}"
    return f"{repo}: " + ", ".join(f"{k} {v}" for k, v in report.as_dict().items() if isinstance(v, int) and v)


def ignore_ownerless_move(session: Session, old: str, new: str, cause: str) -> str:
    """A move of `old` to `new`, a name with no owner, is ignored: every Space has an owner, so
    no Space is there to follow. The env at `old` (if the catalog has it) keeps its name, and its
    trail says what was ignored. Returns why, for the delivery or the job."""
    new = new[:200]
    reason = f"{new!r} names no owner; a Space moves only to owner/name, so the move is ignored"
    owner, _, name = old.partition("/")
    env = session.scalar(
        select(EnvRecord).where(
            EnvRecord.source == "hf", EnvRecord.owner == owner, EnvRecord.name == name, EnvRecord.gone.is_(False)
        )
    )
    if env is not None:
        summary = f"{old} was said to move to {new!r}, which names no owner; the move is ignored"
        record(session, env, "move_ignored", summary, cause=cause, moved_to=new)
    return reason


def _unconfirmed_move(source: HfSource, old: str, new: str) -> str | None:
    """Why the Hub does not confirm that `old` is now `new` (None when it does): the Space must be
    at the new name, and the old name must have nothing of its own (the Hub may redirect it).

    Raises:
        SourceError: the Hub did not answer (the job is tried again later).
    """
    at_new = source.locate(*new.split("/", 1))
    if at_new != new:
        return f"the Hub has no Space {new}"
    at_old = source.locate(*old.split("/", 1))
    if at_old is not None and at_old != new:
        return f"the Hub still has {old}; a moved Space leaves its old name"
    return None


def _move(session: Session, old: str, new: str, cause: str) -> None:
    """Follow a renamed Space: the env keeps its history under the new name (unless the new name
    is already in the catalog, and then the old entry is gone)."""
    envs = {
        e.repo_id: e
        for e in session.scalars(
            select(EnvRecord).where(
                EnvRecord.source == "hf",
                ((EnvRecord.owner == old.split("/")[0]) & (EnvRecord.name == old.split("/")[1]))
                | ((EnvRecord.owner == new.split("/")[0]) & (EnvRecord.name == new.split("/")[1])),
            )
        )
    }
    env = envs.get(old)
    if env is None or env.gone:
        return
    if new in envs:
        env.gone, env.gone_at = True, utcnow()
        record(
            session,
            env,
            "moved",
            f"{old} moved to {new}, which the catalog already has; {old} is gone",
            cause=cause,
            moved_to=new,
        )
        return
    env.owner, env.name = new.split("/")
    record(session, env, "moved", f"{old} moved to {new}", cause=cause, moved_from=old, moved_to=new)
