"""Pins and locks as the catalog sees them: resolving a digest pin, noting explicit pins, renewing a
lock resolved through, and what image collection must keep (docs/hub-api.md, "Pins and locks").

A version resolved by an explicit pin (a full commit sha or an image digest) gets `pinned_at`; a
lock file `openenv lock` registered (hub_service/locks) names versions until it expires. Image
collection keeps the images of both.
"""

from __future__ import annotations

import datetime as dt
import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog.lock_models import ImageLock, ImageLockEntry
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import utcnow
from hub_service.errors import InvalidRequest, NotFound

__all__ = [
    "WRITE_EVERY",
    "digest_of",
    "extend_lock",
    "is_explicit_pin",
    "live_locked_version_ids",
    "note_pin",
    "renew_lock",
    "version_by_digest",
]

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_LOCK_ID = re.compile(r"^[0-9a-f]{64}$")
# Resolves through a lock or a pin are frequent; their bookkeeping is written at most this often.
WRITE_EVERY = dt.timedelta(hours=1)


def digest_of(revision: str | None) -> str | None:
    """`revision` as an image digest (`sha256:<64 hex>`, lowercase) when it is one, else None.

    Raises:
        InvalidRequest: it starts with `sha256:` but is not a whole digest.
    """
    if not revision or revision[:7].lower() != "sha256:":
        return None
    digest = revision.lower()
    if not _DIGEST.match(digest):
        raise InvalidRequest("an image digest is 'sha256:' and 64 hex digits (0-9, a-f); copy it whole")
    return digest


def is_explicit_pin(revision: str | None) -> bool:
    """Whether `revision` always names the same image: a full 40-hex commit sha or a digest."""
    if not revision:
        return False
    return digest_of(revision) is not None or _FULL_SHA.match(revision.lower()) is not None


def version_by_digest(session: Session, env: EnvRecord, digest: str) -> EnvVersion:
    """The version of `env` whose pushed image has `digest`.

    Raises:
        NotFound: none has; the message says which env's image it is, or the env's current digest.
    """
    found = session.scalar(
        select(EnvVersion)
        .where(EnvVersion.env_id == env.id, EnvVersion.image_digest == digest, EnvVersion.registry_ref.is_not(None))
        .order_by(EnvVersion.id.desc())
        .limit(1)
    )
    if found is not None:
        return found
    elsewhere = session.execute(
        select(EnvRecord.owner, EnvRecord.name, EnvVersion.sha)
        .join(EnvVersion, EnvVersion.env_id == EnvRecord.id)
        .where(EnvVersion.image_digest == digest, EnvVersion.registry_ref.is_not(None))
        .limit(1)
    ).first()
    suggestions: list[str] = []
    if elsewhere is not None:
        suggestions = [f"{elsewhere.owner}/{elsewhere.name}@{digest}"]
        hint = f"; it is the image of {elsewhere.owner}/{elsewhere.name}@{elsewhere.sha[:12]}: did you mean {suggestions[0]}?"
    else:
        current = session.get(EnvVersion, env.latest_version_id) if env.latest_version_id is not None else None
        if current is not None and current.image_digest and current.registry_ref:
            suggestions = [f"{env.repo_id}@{current.image_digest}"]
            hint = f"; did you mean its current image, {suggestions[0]}?"
        else:
            hint = "; none of its revisions has a pushed image yet: pin a commit sha instead"
    raise NotFound(f"{env.repo_id} has no revision whose image is {digest}{hint}", suggestions=suggestions)


def note_pin(version: EnvVersion, now: dt.datetime | None = None) -> None:
    """Remember that a client asked for `version` by an explicit pin (its image is then kept)."""
    now = now or utcnow()
    if version.pinned_at is None or now - version.pinned_at > WRITE_EVERY:
        version.pinned_at = now


def renew_lock(session: Session, lock_id: str, ttl_days: int) -> dt.datetime | None:
    """Push on the expiry of lock `lock_id` (a client resolved through it); its new expiry, or None
    when this Hub does not hold that lock.

    Raises:
        InvalidRequest: `lock_id` is not a lock id.
    """
    if not _LOCK_ID.match(lock_id):
        raise InvalidRequest("lock is the 64-hex id of a lock file (`openenv lock --json` prints it)")
    row = session.get(ImageLock, lock_id)
    if row is None:
        return None
    extend_lock(row, utcnow(), ttl_days, force=False)
    return row.expires_at


def extend_lock(row: ImageLock, now: dt.datetime, ttl_days: int, *, force: bool) -> None:
    """Make `row` live `ttl_days` from `now` (unless `force`, only when that moves it by more than WRITE_EVERY)."""
    wanted = now + dt.timedelta(days=ttl_days)
    if force or wanted - row.expires_at > WRITE_EVERY:
        row.expires_at = max(row.expires_at, wanted)
        row.renewed_at = now


def live_locked_version_ids(session: Session, env_id: int, now: dt.datetime | None = None) -> set[int]:
    """The versions of env `env_id` that a lock not yet expired names."""
    stmt = (
        select(ImageLockEntry.version_id)
        .join(ImageLock, ImageLock.id == ImageLockEntry.lock_id)
        .join(EnvVersion, EnvVersion.id == ImageLockEntry.version_id)
        .where(EnvVersion.env_id == env_id, ImageLock.expires_at > (now or utcnow()))
    )
    return set(session.scalars(stmt))
