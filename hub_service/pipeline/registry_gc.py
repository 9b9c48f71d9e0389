"""Collecting the registry: the images the Hub pushed (one per passing revision, by digest) that
no lock, pin or retention rule keeps any more are deleted from the registry through its API
(`DELETE /v2/<repository>/manifests/<digest>`), so that its storage does not grow with every
revision forever.

What is kept is what image collection keeps on the engine (images_gc.kept_versions): an env's
current revision, open pull requests' heads, unfinished revisions, revisions a live lock names,
unyanked explicit pins, and the `keep_images_per_env` newest other passing main revisions. A
digest that any kept revision also names stays.

A dry run plans only: every manifest it would delete is logged and recorded in
`registry_deletions` as `planned`. A real run logs its plan first, then records each deletion's
outcome, and the revision forgets its registry reference (its resolve record then offers
building from source; a digest pin to it answers 404 with what to do). Deleting manifests frees
no disk by itself: the registry's own blob collection does (`scripts/registry gc`, docs/deploy.md).

Each deletion is its own transaction, which plans that image's env again first and holds what
could keep it until the deletion is recorded: on PostgreSQL the revisions with that image (`FOR
UPDATE`: a lock file registered now, whose entry's foreign key needs a share lock on its revision,
and a pin wait) and the locks naming them (`FOR SHARE`: a renewal waits); on SQLite the write lock.
So a lock registered after the plan keeps its image, and one registered during the deletion is
told the image is gone. As a periodic duty, each deletion also checks its `fence` first (a leader
that lost the lease deletes nothing more).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service import registry_api
from hub_service.catalog.lock_models import ImageLock, ImageLockEntry
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import session_scope
from hub_service.leadership.fence import Fence
from hub_service.pipeline.gc_models import RegistryDeletion
from hub_service.pipeline.images_gc import kept_versions
from hub_service.settings import HubSettings
from hub_service.signing import signature_tag

__all__ = ["Doomed", "collect_registry", "plan"]

log = logging.getLogger("hub_service.pipeline.registry_gc")


@dataclass(frozen=True)
class Doomed:
    """A manifest to delete: `repository` (without the registry's host) at `digest`, of `version_id`."""

    version_id: int
    repository: str
    digest: str


def plan(session: Session, settings: HubSettings) -> list[Doomed]:
    """The manifests nothing keeps, of every env, in the configured registry."""
    assert settings.registry is not None
    host = registry_api.host_of(settings.registry)
    doomed: list[Doomed] = []
    for env in session.scalars(select(EnvRecord).order_by(EnvRecord.id)):
        doomed.extend(_plan_env(session, env, settings.keep_images_per_env, host))
    return doomed


def _plan_env(session: Session, env: EnvRecord, keep: int, host: str) -> list[Doomed]:
    versions = session.scalars(
        select(EnvVersion)
        .where(EnvVersion.env_id == env.id, EnvVersion.registry_ref.is_not(None), EnvVersion.image_digest.is_not(None))
        .order_by(EnvVersion.created_at.desc(), EnvVersion.id.desc())
    ).all()
    if not versions:
        return []
    kept_ids = kept_versions(session, env, keep, versions)
    named = {
        (registry_api.repository_of(v.registry_ref or "", host), v.image_digest) for v in versions if v.id in kept_ids
    }
    doomed: list[Doomed] = []
    for version in versions:
        repository = registry_api.repository_of(version.registry_ref or "", host)
        key = (repository, version.image_digest)
        if version.id in kept_ids or key in named or repository is None or version.image_digest is None:
            continue
        named.add(key)  # two revisions with one image: delete it once
        doomed.append(Doomed(version.id, repository, version.image_digest))
    return doomed


def _still_doomed(session: Session, keep: int, host: str, doomed: Doomed) -> bool:
    """Whether nothing keeps `doomed` now; what could start keeping it stays locked until the
    session's transaction ends (see the module)."""
    same_image = session.scalars(
        select(EnvVersion)
        .where(EnvVersion.image_digest == doomed.digest)
        .order_by(EnvVersion.id)  # rows locked in one order by every collector
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    session.execute(
        select(ImageLock.id)
        .join(ImageLockEntry, ImageLockEntry.lock_id == ImageLock.id)
        .where(ImageLockEntry.version_id.in_([v.id for v in same_image]))
        .with_for_update(read=True, of=ImageLock)
    ).all()
    version = next((v for v in same_image if v.id == doomed.version_id), None)
    env = session.get(EnvRecord, version.env_id, populate_existing=True) if version is not None else None
    return env is not None and doomed in _plan_env(session, env, keep, host)


def collect_registry(
    settings: HubSettings, factory: sessionmaker[Session], *, dry_run: bool, fence: Fence | None = None
) -> list[RegistryDeletion]:
    """Plan (and unless `dry_run`, carry out) the deletion of every manifest nothing keeps; each is
    logged and recorded. Returns the records written.

    Raises:
        Deposed: run as a periodic duty whose `fence` another leader's term has passed (what was
            deleted before is recorded; nothing after).
    """
    if not settings.registry:
        return []
    with factory() as session:
        doomed = plan(session, settings)
    host = registry_api.host_of(settings.registry)
    verb = "would delete" if dry_run else "deleting"
    log.info(
        "registry collection (%s): %s %d manifest(s)%s",
        "dry run" if dry_run else "for real",
        verb,
        len(doomed),
        "".join(f"\n  {host}/{d.repository}@{d.digest}" for d in doomed),
    )
    records: list[RegistryDeletion] = []
    if dry_run:
        with session_scope(factory) as session:
            for d in doomed:
                records.append(_record(session, d, dry_run=True, outcome="planned"))
        return records
    with registry_api.client(settings) as client:
        for d in doomed:
            with session_scope(factory) as session:
                if fence is not None:
                    fence.check(session.connection())
                if not _still_doomed(session, settings.keep_images_per_env, host, d):
                    log.info("registry collection: %s@%s is kept since the plan; not deleted", d.repository, d.digest)
                    continue
                outcome, detail = _delete(client, host, d)
                records.append(_record(session, d, dry_run=False, outcome=outcome, detail=detail))
                if outcome in ("deleted", "gone"):
                    version = session.get(EnvVersion, d.version_id)
                    if version is not None and version.image_digest == d.digest:
                        version.registry_ref = None  # what it resolves to now: building from source
            log.info(
                "registry collection: %s@%s %s%s", d.repository, d.digest, outcome, f" ({detail})" if detail else ""
            )
    return records


def _delete(c: httpx.Client, host: str, doomed: Doomed) -> tuple[str, str]:
    """Delete the image's manifest, and its signature (`sha256-<hex>.sig`, hub_service/signing.py)."""
    outcome, detail = registry_api.delete_manifest(c, host, doomed.repository, doomed.digest)
    if outcome in ("deleted", "gone"):
        tag = signature_tag(doomed.digest)
        try:
            signature = registry_api.manifest_digest(c, host, doomed.repository, tag)
        except registry_api.RegistryError as exc:
            return outcome, f"its signature {tag} was left: {exc}"[:500]
        if signature is not None:
            gone, why = registry_api.delete_manifest(c, host, doomed.repository, signature)
            if gone == "failed":
                return outcome, f"its signature {tag} was left: {why}"[:500]
    return outcome, detail


def _record(session: Session, d: Doomed, *, dry_run: bool, outcome: str, detail: str = "") -> RegistryDeletion:
    row = RegistryDeletion(
        repository=d.repository,
        digest=d.digest,
        version_id=d.version_id,
        dry_run=dry_run,
        outcome=outcome,
        detail=detail,
    )
    session.add(row)
    session.flush()
    return row
