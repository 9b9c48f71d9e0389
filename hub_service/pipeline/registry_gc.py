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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import session_scope
from hub_service.pipeline.gc_models import RegistryDeletion
from hub_service.pipeline.images_gc import kept_versions
from hub_service.settings import HubSettings

__all__ = ["Doomed", "collect_registry", "plan"]

log = logging.getLogger("hub_service.pipeline.registry_gc")
_ACCEPT = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    )
)


@dataclass(frozen=True)
class Doomed:
    """A manifest to delete: `repository` (without the registry's host) at `digest`, of `version_id`."""

    version_id: int
    repository: str
    digest: str


def _host(registry: str) -> str:
    return registry.split("/", 1)[0]


def _repository(registry_ref: str, host: str) -> str | None:
    """`owner/name` path of `<host>/<path>:<tag>` (None for an image of another registry)."""
    if not registry_ref.startswith(host + "/"):
        return None
    return registry_ref[len(host) + 1 :].rsplit(":", 1)[0]


def plan(session: Session, settings: HubSettings) -> list[Doomed]:
    """The manifests nothing keeps, of every env, in the configured registry."""
    assert settings.registry is not None
    host = _host(settings.registry)
    doomed: list[Doomed] = []
    for env in session.scalars(select(EnvRecord).order_by(EnvRecord.id)):
        versions = session.scalars(
            select(EnvVersion)
            .where(
                EnvVersion.env_id == env.id, EnvVersion.registry_ref.is_not(None), EnvVersion.image_digest.is_not(None)
            )
            .order_by(EnvVersion.created_at.desc(), EnvVersion.id.desc())
        ).all()
        if not versions:
            continue
        kept_ids = kept_versions(session, env, settings.keep_images_per_env, versions)
        named = {(_repository(v.registry_ref or "", host), v.image_digest) for v in versions if v.id in kept_ids}
        for version in versions:
            repository = _repository(version.registry_ref or "", host)
            key = (repository, version.image_digest)
            if version.id in kept_ids or key in named or repository is None or version.image_digest is None:
                continue
            named.add(key)  # two revisions with one image: delete it once
            doomed.append(Doomed(version.id, repository, version.image_digest))
    return doomed


def collect_registry(settings: HubSettings, factory: sessionmaker[Session], *, dry_run: bool) -> list[RegistryDeletion]:
    """Plan (and unless `dry_run`, carry out) the deletion of every manifest nothing keeps; each is
    logged and recorded. Returns the records written."""
    if not settings.registry:
        return []
    with factory() as session:
        doomed = plan(session, settings)
    host = _host(settings.registry)
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
    with _client(settings) as client:
        for d in doomed:
            outcome, detail = _delete(client, host, d)
            with session_scope(factory) as session:
                records.append(_record(session, d, dry_run=False, outcome=outcome, detail=detail))
                if outcome in ("deleted", "gone"):
                    version = session.get(EnvVersion, d.version_id)
                    if version is not None and version.image_digest == d.digest:
                        version.registry_ref = None  # what it resolves to now: building from source
            log.info(
                "registry collection: %s@%s %s%s", d.repository, d.digest, outcome, f" ({detail})" if detail else ""
            )
    return records


def _client(settings: HubSettings) -> httpx.Client:
    auth = None
    if settings.registry_user:
        password = settings.registry_password.get_secret_value() if settings.registry_password else ""
        auth = httpx.BasicAuth(settings.registry_user, password)
    return httpx.Client(auth=auth, timeout=30.0, headers={"Accept": _ACCEPT})


def _base_url(host: str) -> str:
    # As Docker does: plain HTTP to a registry on this machine, HTTPS to any other.
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    local = name in ("localhost", "[::1]") or name.startswith("127.")
    return f"{'http' if local else 'https'}://{host}"


def _delete(client: httpx.Client, host: str, doomed: Doomed) -> tuple[str, str]:
    url = f"{_base_url(host)}/v2/{doomed.repository}/manifests/{doomed.digest}"
    try:
        reply = client.delete(url)
    except httpx.HTTPError as exc:  # the registry is down: the next collection tries again
        return "failed", f"{type(exc).__name__}: {exc}"[:500]
    if reply.status_code in (200, 202):
        return "deleted", ""
    if reply.status_code == 404:
        return "gone", ""
    hint = " (the registry must allow deletes: storage.delete.enabled)" if reply.status_code == 405 else ""
    return "failed", f"{reply.status_code} {reply.text[:300]}{hint}"


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
