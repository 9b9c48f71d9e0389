"""Removing the images nobody needs any more: the Hub builds one image per revision and per
pull-request head, and without this its disk would fill.

Kept: the env's current revision, the heads of its open pull requests, anything not finished,
every revision a live lock file names (yanked or not), every unyanked revision a client resolved
by an explicit pin (`pinned_at`: a full sha or an image digest, hub_service/catalog/pins.py),
and the `keep_images_per_env` newest other passing main revisions (clients may pin them). The
rest of its images are removed after each of its jobs, and their versions forget the image (the
resolve record then offers building from source). An image a container still runs (a play
session) is not forced out: the next pass takes it.

Each image is removed in its own transaction, which plans its env again first and holds what could
keep it until the version has forgotten it (as registry collection does, registry_gc.py): on
PostgreSQL the versions naming that image `FOR UPDATE` (a new lock entry's foreign key and a pin
wait) and the locks naming them `FOR SHARE`; on SQLite the write lock. A lock registered after the
plan keeps its image.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.lock_models import ImageLock, ImageLockEntry
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.pins import live_locked_version_ids
from hub_service.catalog.states import BuilderKind, VersionState
from hub_service.db import session_scope
from hub_service.prbot.models import PullRequestCheck
from hub_service.settings import HubSettings

__all__ = ["kept_versions", "prune_env_images"]

log = logging.getLogger("hub_service.pipeline.images_gc")
_FINISHED = (VersionState.PASSED, VersionState.FAILED, VersionState.CANCELLED)


def _doomed(session: Session, env: EnvRecord, keep: int) -> list[tuple[int, str]]:
    """(version id, image) pairs to remove, newest first."""
    versions = session.scalars(
        select(EnvVersion)
        .where(
            EnvVersion.env_id == env.id, EnvVersion.builder == BuilderKind.CONTAINER, EnvVersion.image_ref.is_not(None)
        )
        .order_by(EnvVersion.created_at.desc(), EnvVersion.id.desc())
    ).all()
    kept_ids = kept_versions(session, env, keep, versions)
    kept = {v.image_ref for v in versions if v.id in kept_ids}
    doomed = [(v.id, v.image_ref) for v in versions if v.id not in kept_ids and v.image_ref is not None]
    return [(vid, ref) for vid, ref in doomed if ref not in kept]  # a tag a kept version also names stays


def kept_versions(session: Session, env: EnvRecord, keep: int, versions: Sequence[EnvVersion]) -> set[int]:
    """The ids of `versions` (of `env`, newest first) whose images stay (see the module)."""
    open_heads = set(
        session.scalars(
            select(PullRequestCheck.version_id).where(
                PullRequestCheck.env_id == env.id, PullRequestCheck.status.in_(("open", "draft"))
            )
        )
    )
    protected = {env.latest_version_id} | open_heads | live_locked_version_ids(session, env.id)
    kept: set[int] = set()
    fallbacks = 0
    for version in versions:
        if (
            version.id in protected
            or version.state not in _FINISHED
            or (version.pinned_at is not None and not version.yanked)
        ):
            kept.add(version.id)
        elif version.state == VersionState.PASSED and version.ref == "main" and not version.yanked and fallbacks < keep:
            kept.add(version.id)
            fallbacks += 1
    return kept


def prune_env_images(settings: HubSettings, factory: sessionmaker[Session], env_id: int) -> list[str]:
    """Remove the images of `env_id` that nobody needs (see the module); returns those removed."""
    with factory() as session:
        env = session.get(EnvRecord, env_id)
        doomed = _doomed(session, env, settings.keep_images_per_env) if env is not None else []
    if not doomed:
        return []
    from docker.errors import APIError, ImageNotFound

    from openenv.engines import engine

    client = engine().new_client(ping=False)
    removed: dict[int, str] = {}
    try:
        for version_id, ref in doomed:
            with session_scope(factory) as session:
                if not _still_doomed(session, env_id, settings.keep_images_per_env, version_id, ref):
                    log.info("keeping image %s: something keeps it since the plan", ref)
                    continue
                try:
                    client.images.remove(ref)  # not forced: an image a container runs stays until the next pass
                except ImageNotFound:
                    pass  # removed by hand: the version forgets it all the same
                except APIError as exc:
                    log.info("keeping image %s for now: %s", ref, getattr(exc, "explanation", None) or exc)
                    continue
                version = session.get(EnvVersion, version_id)
                if version is not None and version.image_ref == ref:
                    version.image_ref = None
            removed[version_id] = ref
    finally:
        client.close()
    log.info("removed %d image(s) of env %s: %s", len(removed), env_id, ", ".join(removed.values()))
    return list(removed.values())


def _still_doomed(session: Session, env_id: int, keep: int, version_id: int, ref: str) -> bool:
    """Whether nothing keeps `ref` of `version_id` now; what could start keeping it stays locked
    until the session's transaction ends (see the module)."""
    same_image = session.scalars(
        select(EnvVersion.id)
        .where(EnvVersion.env_id == env_id, EnvVersion.image_ref == ref)
        .order_by(EnvVersion.id)  # rows locked in one order by every collector
        .with_for_update()
    ).all()
    session.execute(
        select(ImageLock.id)
        .join(ImageLockEntry, ImageLockEntry.lock_id == ImageLock.id)
        .where(ImageLockEntry.version_id.in_(same_image))
        .with_for_update(read=True, of=ImageLock)
    ).all()
    env = session.get(EnvRecord, env_id, populate_existing=True)
    return env is not None and (version_id, ref) in _doomed(session, env, keep)
