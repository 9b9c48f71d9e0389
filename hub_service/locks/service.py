"""Registering lock files (`POST /api/v1/locks`): a lock names env revisions this Hub indexed, and
while it lives their images are kept (hub_service/catalog/pins.py says what "kept" reads).

A registration is one transaction that no other registration of the same user interleaves with (on
PostgreSQL an advisory lock on the user, on SQLite the write lock taken at its start), so that two
at once cannot both pass the quota. It reads the revisions it names `FOR SHARE` (PostgreSQL), so
an image collection deleting one of their images either waits for it or is waited for
(hub_service/pipeline/registry_gc.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.lock_models import ImageLock, ImageLockEntry
from hub_service.catalog.models import EnvVersion
from hub_service.catalog.pins import extend_lock
from hub_service.catalog.service import get_env
from hub_service.db import affected_rows, session_scope, utcnow
from hub_service.errors import Conflict, Forbidden, InvalidRequest, NotFound

__all__ = ["MAX_ENVS", "QuotaReached", "purge_expired", "register"]

MAX_ENVS = 256  # envs one lock may name: a training run's, not a mirror of the catalog
_QUOTA_LOCK = 0x4C4F434B  # "LOCK": the first key of the advisory locks on users' quotas (PostgreSQL)


class QuotaReached(Forbidden):
    """The user holds as many live locks as one user may."""

    code = "quota_reached"


def register(
    session: Session, document: Any, ttl_days: int, *, owner: str | None = None, max_per_owner: int | None = None
) -> tuple[ImageLock, bool]:
    """Hold the lock file `document` for `ttl_days`; returns (the lock, whether it is new). A lock
    registered again is renewed (by anyone: it keeps its first owner).

    Args:
        owner: the Hugging Face user registering it (the API asks whoami for the token's user).
        max_per_owner: live locks `owner` may hold; a new one past that is refused.

    Raises:
        InvalidRequest: not a lock file (the message says what is wrong), or too many envs.
        NotFound: an env or a revision it names is unknown here.
        Conflict: the image digest it names is not the one this Hub pushed for that revision.
        QuotaReached: `owner` already holds `max_per_owner` live locks.
    """
    from openenv.client.lock import Lock
    from openenv.errors import ConfigurationError

    try:
        lock = Lock.from_dict(document, source="the posted lock")
    except ConfigurationError as exc:
        raise InvalidRequest(str(exc)) from None
    if len(lock.envs) > MAX_ENVS:
        raise InvalidRequest(f"a lock names at most {MAX_ENVS} envs; split the run's envs into several locks")
    _serialize(session, owner if max_per_owner is not None else None)
    now = utcnow()
    existing = session.get(ImageLock, lock.id, populate_existing=True)
    if existing is not None:
        _hold_versions(session, lock.id)
        extend_lock(existing, now, ttl_days, force=True)
        return existing, False
    if owner is not None and max_per_owner is not None:
        held = session.scalar(
            select(func.count()).select_from(ImageLock).where(ImageLock.owner == owner, ImageLock.expires_at > now)
        )
        if (held or 0) >= max_per_owner:
            raise QuotaReached(
                f"{owner} holds {held} live locks, the most one user may on this Hub; re-register one of them "
                "(it is renewed, not counted again), or wait until one expires",
                held=held,
                limit=max_per_owner,
            )
    row = ImageLock(
        id=lock.id,
        document=lock.to_dict(),
        owner=owner,
        created_at=now,
        expires_at=now + dt.timedelta(days=ttl_days),
    )
    row.entries = [ImageLockEntry(version_id=_locked_version(session, entry).id) for entry in lock.envs.values()]
    session.add(row)
    try:
        session.flush()
    except IntegrityError:  # the same lock registered at this very moment by another request
        session.rollback()
        existing = session.get(ImageLock, lock.id)
        if existing is None:
            raise
        extend_lock(existing, now, ttl_days, force=True)
        return existing, False
    return row, True


def _serialize(session: Session, owner: str | None) -> None:
    """Make this registration's transaction one no other registration by `owner` interleaves with
    (see the module). On SQLite, a session already in a transaction stays as it is: SQLite refuses
    its first write if another writer committed since it began, rather than let it count stale rows."""
    bind = session.get_bind()
    if bind.dialect.name == "sqlite":
        if not session.in_transaction():
            session.connection(execution_options={"openenv_write": True})
    elif owner is not None:
        session.execute(text(f"SELECT pg_advisory_xact_lock({_QUOTA_LOCK}, hashtext(:owner))"), {"owner": owner})


def _hold_versions(session: Session, lock_id: str) -> None:
    """Share-lock the revisions lock `lock_id` names (PostgreSQL), so that renewing it and collecting
    their images never interleave."""
    session.execute(
        select(EnvVersion.id)
        .join(ImageLockEntry, ImageLockEntry.version_id == EnvVersion.id)
        .where(ImageLockEntry.lock_id == lock_id)
        .with_for_update(read=True, of=EnvVersion)
    ).all()


def _locked_version(session: Session, entry: Any) -> EnvVersion:
    owner, _, name = entry.id.partition("/")
    env = get_env(session, owner, name)
    version = session.scalar(
        select(EnvVersion)
        .where(EnvVersion.env_id == env.id, EnvVersion.sha == entry.revision)
        .with_for_update(read=True)
        .execution_options(populate_existing=True)
    )
    if version is None:
        raise NotFound(
            f"{entry.id} has no revision {entry.revision} on this Hub; lock against the Hub that resolved it, "
            "or re-run `openenv lock` here"
        )
    if entry.image_digest is not None and not (version.registry_ref and version.image_digest == entry.image_digest):
        raise Conflict(
            f"the lock gives {entry.id}@{entry.revision[:12]} the image {entry.image_digest}, but this Hub's is "
            f"{version.image_digest or 'none'}; re-run `openenv lock` against this Hub",
            sha=version.sha,
        )
    return version


def purge_expired(factory: sessionmaker[Session]) -> int:
    """Delete the locks that have expired (they keep nothing any more); returns how many."""
    with session_scope(factory) as session:
        now = utcnow()
        expired = select(ImageLock.id).where(ImageLock.expires_at < now)
        session.execute(
            delete(ImageLockEntry)
            .where(ImageLockEntry.lock_id.in_(expired))
            .execution_options(synchronize_session=False)
        )
        gone = delete(ImageLock).where(ImageLock.expires_at < now).execution_options(synchronize_session=False)
        return affected_rows(session.execute(gone))
