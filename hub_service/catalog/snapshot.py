"""The catalog as a snapshot in upstream OpenEnv's Environment Card profile (`0.1-draft`).

Upstream's `openenv catalog inspect` and `openenv discover --catalog FILE` read it as they read a
snapshot built from a Git monorepo. The profile binds every entry to one source revision of one
GitHub repository; a Hub is many Spaces, each at its own commit. So the snapshot's source is the
configured `catalog_source_uri` at a *catalog revision*: the sha256 of every listed
(env, commit, image digest), which changes whenever any entry would. Each env's own Space,
commit, image digest and resolve URL ride in its entry's `metadata.hub`.

The body is streamed: envs are read from the database in batches and each entry is written and
hashed as it is made, so memory stays flat however many envs the Hub lists. The digest is the
profile's: sha256 over the snapshot without `digest`, keys sorted, compact, UTF-8.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only, sessionmaker

from hub_service.catalog.discovery import validation_parts
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import EnvStatus, VersionState
from hub_service.settings import _DNS, HubSettings
from openenv.validation.rfc008 import check_summary

__all__ = ["MEDIA_TYPE", "PROFILE", "canonical", "publisher_of", "stream_snapshot", "stream_snapshot_async"]

PROFILE = "0.1-draft"
MEDIA_TYPE = "application/vnd.openenv.environment-card+json"
CONTEXT = "https://agenticresourcediscovery.org/context/v1"
GENERATOR = {"name": "openenv-git-catalog", "version": "1"}
NAMESPACE = "openenv"
ROOT = "envs"
BATCH = 200
CHUNK = 64 * 1024
MAX_TEXT = 8192  # the profile's longest string

# Only what an entry shows (never the README or the validation report, which can be large).
_ENV_COLUMNS = (
    EnvRecord.source,
    EnvRecord.owner,
    EnvRecord.name,
    EnvRecord.title,
    EnvRecord.description,
    EnvRecord.tags,
    EnvRecord.deprecated,
    EnvRecord.successor,
)
_VERSION_COLUMNS = (
    EnvVersion.sha,
    EnvVersion.manifest,
    EnvVersion.discovery,
    EnvVersion.registry_ref,
    EnvVersion.image_digest,
    EnvVersion.rfc008,
)


@dataclass(frozen=True)
class _Planned:
    path: str
    version_id: int


def canonical(value: Any) -> bytes:
    """The profile's canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def publisher_of(settings: HubSettings) -> str:
    """Who publishes the snapshot: the setting, else the public URL's host when it is a DNS name."""
    if settings.catalog_publisher:
        return settings.catalog_publisher
    host = urlsplit(settings.public_url).hostname or ""
    return host if _DNS.match(host) else "openenv-hub.localhost"


async def stream_snapshot_async(factory: sessionmaker[Session], settings: HubSettings) -> AsyncIterator[bytes]:
    """`stream_snapshot` made in ONE worker thread and handed over through a short queue.

    A plain generator given to a streaming response is advanced on whichever pool thread is free,
    chunk after chunk; each thread's allocator keeps its own arena, so memory grew with the number
    of threads it wandered over. One producer thread keeps it flat; the queue bounds what waits.
    """
    pieces: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in stream_snapshot(factory, settings):
                while not stop.is_set():
                    try:
                        pieces.put(piece, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            pieces.put(None)
        except BaseException as exc:  # handed to the reader, which raises it in the request
            pieces.put(exc)

    producer = threading.Thread(target=produce, name="catalog-snapshot", daemon=True)
    producer.start()
    try:
        while True:
            try:  # a bounded wait, so a reader that went away never leaves a pool thread blocked
                piece = await asyncio.to_thread(pieces.get, True, 1.0)
            except queue.Empty:
                if producer.is_alive() or not pieces.empty():
                    continue
                raise RuntimeError("the catalog snapshot's producer stopped without finishing") from None
            if piece is None:
                return
            if isinstance(piece, BaseException):
                raise piece
            yield piece
    finally:
        stop.set()


def stream_snapshot(factory: sessionmaker[Session], settings: HubSettings) -> Iterator[bytes]:
    """The snapshot's bytes, in chunks of about 64 KiB, for every public env whose current revision passed."""
    buffer = bytearray()
    for piece in _pieces(factory, settings):
        buffer += piece
        if len(buffer) >= CHUNK:  # a server hops threads per chunk: few large ones, not one per entry
            yield bytes(buffer)
            buffer.clear()
    if buffer:
        yield bytes(buffer)


def _pieces(factory: sessionmaker[Session], settings: HubSettings) -> Iterator[bytes]:
    publisher, uri = publisher_of(settings), settings.catalog_source_uri
    repository = uri.removeprefix("https://github.com/").removesuffix(".git")
    with factory() as session:
        planned, revision = _plan(session)
    source = {"id": repository, "provider": "github", "revision": revision, "uri": uri}
    digest = hashlib.sha256(b'{"complete":true,"entries":[')
    head = {"schema_version": PROFILE, "publisher": publisher, "generator": GENERATOR, "source": source}
    yield b"{" + canonical(head)[1:-1] + b',"complete":true,"entries":['
    paths: list[str] = []
    issues: list[dict[str, str]] = []
    context = _Context(settings, publisher, source)
    for start in range(0, len(planned), BATCH):
        chunk = planned[start : start + BATCH]
        with factory() as session:
            rows = {
                version.id: (env, version)
                for env, version in session.execute(
                    select(EnvRecord, EnvVersion)
                    .join(EnvVersion, EnvVersion.env_id == EnvRecord.id)
                    .options(load_only(*_ENV_COLUMNS), load_only(*_VERSION_COLUMNS))
                    .where(EnvVersion.id.in_([p.version_id for p in chunk]))
                )
            }
            for item in chunk:
                row = rows.get(item.version_id)
                if row is None:  # gone between the plan and now: left out, and out of the inventory
                    continue
                entry, warnings = _entry(context, item.path, *row)
                body = canonical(entry)
                digest.update(b"," + body if paths else body)
                yield b"," + body if paths else body
                paths.append(item.path)
                issues += [
                    {"code": "discovery_warning", "message": w[:MAX_TEXT], "path": item.path, "severity": "warning"}
                    for w in warnings
                ]
    inventory = canonical({"paths": paths, "root": ROOT})
    tail = canonical(issues)
    digest.update(b'],"generator":' + canonical(GENERATOR) + b',"inventory":' + inventory + b',"issues":' + tail)
    digest.update(b',"publisher":' + canonical(publisher) + b',"schema_version":' + canonical(PROFILE))
    digest.update(b',"source":' + canonical(source) + b"}")
    yield b'],"inventory":' + inventory + b',"issues":' + tail
    yield b',"digest":"sha256:' + digest.hexdigest().encode() + b'"}\n'


def _plan(session: Session) -> tuple[list[_Planned], str]:
    """Which versions the snapshot lists, in path order, and the catalog revision they make."""
    rows = session.execute(
        select(
            EnvRecord.source, EnvRecord.owner, EnvRecord.name, EnvVersion.id, EnvVersion.sha, EnvVersion.image_digest
        )
        .join(EnvVersion, EnvVersion.id == EnvRecord.latest_version_id)
        .where(
            EnvRecord.gone.is_(False),
            EnvRecord.private.is_(False),
            EnvRecord.status == EnvStatus.PASSING,
            EnvVersion.state == VersionState.PASSED,
            EnvVersion.yanked.is_(False),
        )
    )
    planned: dict[str, tuple[_Planned, str]] = {}
    for source, owner, name, version_id, sha, image_digest in rows:
        path = _path(source, owner, name)
        planned.setdefault(path, (_Planned(path, version_id), f"{path} {sha} {image_digest or '-'}\n"))
    ordered = [planned[path] for path in sorted(planned)]
    revision = hashlib.sha256("".join(line for _, line in ordered).encode()).hexdigest()
    return [item for item, _ in ordered], revision


def _path(source: str, owner: str, name: str) -> str:
    # One folder name per env: Space names never hold "--", so owner--name cannot collide.
    return f"{ROOT}/{owner}--{name}" if source == "hf" else f"{ROOT}/{source}--{owner}--{name}"


@dataclass(frozen=True)
class _Context:
    settings: HubSettings
    publisher: str
    source: dict[str, str]


def _clip(value: Any) -> str | None:
    return value.strip()[:MAX_TEXT] if isinstance(value, str) and value.strip() else None


def _entry(context: _Context, path: str, env: EnvRecord, version: EnvVersion) -> tuple[dict[str, Any], list[str]]:
    """One DiscoveryEntry (as the profile dumps it, None left out) and the warnings to report."""
    manifest = version.manifest if isinstance(version.manifest, dict) else {}
    found = version.discovery if isinstance(version.discovery, dict) else {}
    revision = context.source["revision"]
    origins = (
        ("discovery.json", found.get("description")),
        ("openenv.yaml", manifest.get("description")),
        ("README.md", env.description),
        ("README.md", env.title),
    )
    origin, description = next(((o, _clip(v)) for o, v in origins if _clip(v)), ("hub", env.repo_id))
    name = _clip(manifest.get("name")) or env.name
    interfaces: list[dict[str, Any]] = [{"protocol": "openenv", "role": "orchestration"}]
    tools = found.get("agent_tools") if isinstance(found.get("agent_tools"), dict) else None
    capabilities: list[str] = []
    if tools:
        interfaces.append(
            {"protocol": tools["protocol"], "role": "agent-tools", "source_revision": revision, "status": "declared"}
        )
        capabilities = list(tools["names"])
    card: dict[str, Any] = {
        "schema_version": PROFILE,
        "name": name,
        "description": description,
        "owner": {"authority": "huggingface.co" if env.source == "hf" else context.publisher, "id": env.owner},
        "source": {**context.source, "path": path},
        # The profile's only artifact kind is a path in its Git source; ours are a Space and an
        # OCI image elsewhere, named in metadata.hub.
        "artifact_availability": "external",
        "artifacts": [],
        "interfaces": interfaces,
        **_license(context.settings, env, version, found),
    }
    spec = manifest.get("spec_version")
    if isinstance(spec, int | str) and not isinstance(spec, bool):
        card["manifest_spec_version"] = spec
    if isinstance(found.get("framework_requirement"), str):
        card["framework_requirement"] = found["framework_requirement"]
    tags = found.get("tags") or [t for t in env.tags or [] if isinstance(t, str)] or manifest.get("tags") or []
    locator = hashlib.sha256(f"{context.source['uri']}\n{path}".encode()).hexdigest()
    entry: dict[str, Any] = {
        "@context": CONTEXT,
        "identifier": f"urn:air:{context.publisher}:{NAMESPACE}:{locator}:{revision}",
        "displayName": env.repo_id,
        "type": MEDIA_TYPE,
        "data": card,
        "description": description,
        "tags": sorted({t.strip()[:MAX_TEXT] for t in tags if isinstance(t, str) and t.strip()}),
        "capabilities": capabilities,
        "representativeQueries": list(found.get("representative_queries") or []),
        "metadata": {
            "provenance": {"description": origin, "name": "openenv.yaml" if manifest.get("name") else "hub"},
            "hub": _hub(context.settings, env, version, manifest),
        },
    }
    warnings = [w["message"] for w in found.get("warnings") or [] if isinstance(w, dict) and _clip(w.get("message"))]
    return entry, warnings


def _license(settings: HubSettings, env: EnvRecord, version: EnvVersion, found: dict[str, Any]) -> dict[str, str]:
    name, origin = found.get("license"), found.get("license_origin")
    if not isinstance(name, str) or not name:
        return {"license": "unknown"}
    url = _file_url(settings, env, version, origin) if isinstance(origin, str) and name != "unknown" else None
    if name == "other" and url is None:
        return {"license": "unknown"}  # the profile needs a reference for "other"; we have none to give
    return {"license": name, **({"license_url": url} if url else {})}


def _file_url(settings: HubSettings, env: EnvRecord, version: EnvVersion, origin: str) -> str | None:
    """An https link to a file of the Space at the revision (None for local folders or http Hubs)."""
    if env.source != "hf":
        return None
    base = (settings.hf_endpoint or "https://huggingface.co").rstrip("/")
    if not base.startswith("https://"):
        return None
    return f"{base}/spaces/{env.owner}/{env.name}/blob/{version.sha}/{origin}"


def _hub(settings: HubSettings, env: EnvRecord, version: EnvVersion, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the profile has no field for: the env's own id, commit, image and where to resolve it."""
    public = settings.public_url.rstrip("/")
    hub: dict[str, Any] = {
        "id": env.repo_id,
        "source": env.source,
        "revision": version.sha,
        "resolve": f"{public}/api/v1/envs/{env.owner}/{env.name}/resolve?revision={version.sha}",
        "page": f"{public}/api/v1/envs/{env.owner}/{env.name}",
    }
    if version.image_digest:
        hub["image_digest"] = version.image_digest
        if version.registry_ref:
            ref = version.registry_ref.split("@", 1)[0]
            repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
            hub["image"] = f"{repository}@{version.image_digest}"
    if env.deprecated:
        hub["deprecated"] = True
        if env.successor:
            hub["successor"] = env.successor
    parts = validation_parts(manifest)
    if parts:
        hub["validation"] = parts
    checks = check_summary(version.rfc008) if version.rfc008 else None
    if checks:  # the RFC 008 report in 60 bytes: `openenv discover --check ID` filters on it
        hub["checks"] = checks
    return hub
