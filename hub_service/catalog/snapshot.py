"""The catalog as snapshots in upstream OpenEnv's Environment Card profile (`0.1-draft`), served in
shards that upstream's own reader takes, and the index that names them.

Upstream's `openenv discover QUERY --catalog FILE` and `openenv catalog inspect` (openenv 0.10.0)
read one local file of at most 16 MiB (`MAX_CATALOG_BYTES`) into a `CatalogSnapshot` whose models
forbid any field the profile lacks, so one document can neither be larger nor point to another. A
catalog is therefore served as *shards*: each a complete snapshot of a run of envs in path order,
within `catalog_shard_bytes` (16 MiB) as served; the index (`build_index`) names each by URL, digest,
size and count. A catalog that fits in one document is one shard, the whole snapshot. The Hub
keeps each revision's shards as files once its index is made (`shard_store`).

The profile binds every entry to one source revision of one GitHub repository; a Hub is many
Spaces, each at its own commit. So every shard's source is the configured `catalog_source_uri` at
the *catalog revision*: the sha256 of the settings entries are made from and of every listed env's
path and what its entry shows that can change (`cards.CHANGING`). It changes whenever any entry
would, so one revision names the bytes of every shard, and a shard asked for at a revision that is
no longer current is refused (`catalog_changed`) rather than served from another catalog.

Shards are cut greedily: one takes entries from its first path for as long as the next still fits.
That depends on nothing before the first path, so (revision, first path) names a shard, and any
shard is made without the ones before it. Bodies are streamed: envs are read in batches and each
entry is written and hashed as it is made, so memory stays flat however many envs the Hub lists.
The digest is the profile's: sha256 over the document without `digest`, keys sorted, compact, UTF-8.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import logging
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode, urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only, sessionmaker

from hub_service.catalog import cards
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import EnvStatus, VersionState
from hub_service.errors import Conflict
from hub_service.settings import _DNS, HubSettings

__all__ = [
    "Plan",
    "build_index",
    "canonical",
    "make_plan",
    "open_shard",
    "publisher_of",
    "shard_file",
    "stream_in_thread",
    "stream_snapshot",
]

log = logging.getLogger("hub_service.catalog")

GENERATOR = {"name": "openenv-git-catalog", "version": "1"}
ROOT = "envs"
BATCH = 200
CHUNK = 64 * 1024
_DIGEST_HEX = 64


def canonical(value: Any) -> bytes:
    """The profile's canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def publisher_of(settings: HubSettings) -> str:
    """Who publishes the snapshot: the setting, else the public URL's host when it is a DNS name."""
    if settings.catalog_publisher:
        return settings.catalog_publisher
    host = urlsplit(settings.public_url).hostname or ""
    return host if _DNS.match(host) else "openenv-hub.localhost"


@dataclass(frozen=True)
class Plan:
    """The versions the catalog lists, in path order, and the catalog revision they make."""

    paths: list[str]
    version_ids: list[int]
    revision: str


def make_plan(factory: sessionmaker[Session], settings: HubSettings) -> Plan:
    """Every public env whose current revision passed (not yanked), by path, and the catalog revision."""
    inputs = (publisher_of(settings), settings.catalog_source_uri, settings.public_url, settings.hf_endpoint)
    found: dict[str, tuple[int, str]] = {}
    with factory() as session:
        rows = session.execute(
            select(EnvRecord.source, EnvRecord.owner, EnvRecord.name, EnvVersion.id, *cards.CHANGING)
            .join(EnvVersion, EnvVersion.id == EnvRecord.latest_version_id)
            .where(
                EnvRecord.gone.is_(False),
                EnvRecord.private.is_(False),
                EnvRecord.status == EnvStatus.PASSING,
                EnvVersion.state == VersionState.PASSED,
                EnvVersion.yanked.is_(False),
            )
            .execution_options(yield_per=2000)
        )
        for source, owner, name, version_id, *changing in rows:
            path = _path(source, owner, name)
            if path not in found:
                # repr: unambiguous for the strings, lists, datetimes and None these are, and several
                # times cheaper than JSON over 50,000 rows (every index request makes a plan).
                found[path] = (version_id, hashlib.sha256(repr(changing).encode()).hexdigest())
    paths = sorted(found)
    revision = hashlib.sha256(json.dumps(inputs).encode() + b"\n")
    for path in paths:
        revision.update(f"{path} {found[path][1]}\n".encode())
    return Plan(paths, [found[p][0] for p in paths], revision.hexdigest())


def _path(source: str, owner: str, name: str) -> str:
    # One folder name per env: Space names never hold "--", so owner--name cannot collide.
    return f"{ROOT}/{owner}--{name}" if source == "hf" else f"{ROOT}/{source}--{owner}--{name}"


def stream_snapshot(factory: sessionmaker[Session], settings: HubSettings) -> Iterator[bytes]:
    """The whole catalog as ONE snapshot document, however large, in chunks of about 64 KiB
    (`openenv hub export-catalog`; over 16 MiB, upstream's reader refuses it, ours does not)."""
    plan = make_plan(factory, settings)
    return _chunked(_shard(factory, settings, plan, 0, None))


def open_shard(
    factory: sessionmaker[Session],
    settings: HubSettings,
    first: str | None = None,
    revision: str | None = None,
    plan: Plan | None = None,
) -> tuple[str, Iterator[bytes]]:
    """The current catalog revision and the chunks of the shard that starts at path `first` (the
    first env when None; the next listed path when that env is no longer listed). `plan`: the
    current one, when the caller has just made it.

    Raises:
        Conflict: `revision` is not the current catalog revision (reason `catalog_changed`).
    """
    plan = plan or make_plan(factory, settings)
    if revision is not None and revision != plan.revision:
        raise Conflict(
            f"the catalog changed since revision {revision[:12]} (now {plan.revision[:12]}): "
            "read GET /api/v1/catalog/index again and fetch the shards it names",
            reason="catalog_changed",
            revision=plan.revision,
        )
    at = bisect.bisect_left(plan.paths, first) if first else 0
    return plan.revision, _chunked(_shard(factory, settings, plan, at, settings.catalog_shard_bytes))


def build_index(
    factory: sessionmaker[Session],
    settings: HubSettings,
    snapshot_path: str,
    plan: Plan | None = None,
    folder: Path | None = None,
) -> dict[str, Any]:
    """The index of the catalog's shards (of `plan`; the current catalog when None): each one's `url`
    (a path on the Hub: `snapshot_path` with its first env and the revision), `first` and `last` env
    path, `envs`, `bytes` and `digest`.

    Every shard is made to know its size and digest: one pass over the catalog. With `folder`, shard
    N is written there as it is made, to `N.json` (`shard_file`); without, it is hashed, not kept.
    """
    limit = settings.catalog_shard_bytes
    plan = plan or make_plan(factory, settings)
    context = _context(settings, plan.revision)
    shards: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    with _Writer(folder) as writer:
        document = writer.start(_Document(context))
        for made in _entries(factory, context, plan, 0):
            if document.empty + made.alone > limit:
                left_out.append({"path": made.name, "bytes": document.empty + made.alone})
                _too_large(made, document.empty, limit)
                continue
            if document.size + document.grow(made) > limit:
                writer.finish(document.close())
                shards.append(_record(document, snapshot_path, plan.revision, first=not shards))
                document = writer.start(_Document(context))
            writer.write(document.add(made))
        writer.finish(document.close())
        shards.append(_record(document, snapshot_path, plan.revision, first=not shards))
    index: dict[str, Any] = {
        "revision": plan.revision,
        "max_bytes": limit,
        "envs": sum(s["envs"] for s in shards),
        "shards": shards,
        "left_out": left_out,
    }
    index["digest"] = "sha256:" + hashlib.sha256(canonical(index)).hexdigest()
    return index


def shard_file(folder: Path, number: int) -> Path:
    """Where `build_index` writes shard `number` (0: the first) in `folder`."""
    return folder / f"{number}.json"


class _Writer:
    """Writes each shard's pieces to its own file in a folder (None: writes nothing)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder, self.made = folder, 0
        self._out: IO[bytes] | None = None

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._out is not None:
            self._out.close()

    def start(self, document: _Document) -> _Document:
        if self.folder is not None:
            self._out = shard_file(self.folder, self.made).open("wb")
        self.write(document.opening)
        return document

    def write(self, piece: bytes) -> None:
        if self._out is not None:
            self._out.write(piece)

    def finish(self, closing: bytes) -> None:
        self.write(closing)
        if self._out is not None:
            self._out.close()
            self._out = None
        self.made += 1


def _record(document: _Document, snapshot_path: str, revision: str, *, first: bool) -> dict[str, Any]:
    start = document.paths[0] if document.paths else None
    query = {"revision": revision} if first or start is None else {"from": start, "revision": revision}
    return {
        "url": f"{snapshot_path}?{urlencode(query)}",
        "first": start,
        "last": document.paths[-1] if document.paths else None,
        "envs": len(document.paths),
        "bytes": document.size,
        "digest": document.digest,
    }


def _too_large(made: _Made, empty: int, limit: int) -> None:
    log.warning(
        "catalog: the entry of %s alone makes a %d-byte snapshot, over catalog_shard_bytes (%d): left out of the shards",
        made.name,
        empty + made.alone,
        limit,
    )


def _context(settings: HubSettings, revision: str) -> cards.Context:
    uri = settings.catalog_source_uri
    repository = uri.removeprefix("https://github.com/").removesuffix(".git")
    source = {"id": repository, "provider": "github", "revision": revision, "uri": uri}
    return cards.Context(settings, publisher_of(settings), source)


@dataclass(frozen=True)
class _Made:
    """One entry as it is written: its path, and its bytes in the entries, inventory and issues."""

    name: str
    path: bytes
    body: bytes
    issues: tuple[bytes, ...]

    @property
    def alone(self) -> int:
        """What it adds to a document that has no entry yet."""
        return len(self.body) + len(self.path) + sum(map(len, self.issues)) + max(len(self.issues) - 1, 0)


def _entries(factory: sessionmaker[Session], context: cards.Context, plan: Plan, start: int) -> Iterator[_Made]:
    """The entries of the plan from position `start`, read in batches (an env gone since the plan is skipped)."""
    for at in range(start, len(plan.paths), BATCH):
        paths, ids = plan.paths[at : at + BATCH], plan.version_ids[at : at + BATCH]
        with factory() as session:
            rows = {
                version.id: (env, version)
                for env, version in session.execute(
                    select(EnvRecord, EnvVersion)
                    .join(EnvVersion, EnvVersion.env_id == EnvRecord.id)
                    .options(load_only(*cards.ENV_COLUMNS), load_only(*cards.VERSION_COLUMNS))
                    .where(EnvVersion.id.in_(ids))
                )
            }
            for path, version_id in zip(paths, ids, strict=True):
                row = rows.get(version_id)
                if row is None:
                    continue
                entry, warnings = cards.entry(context, path, *row)
                issues = tuple(canonical(_issue(path, w)) for w in warnings)
                yield _Made(path, canonical(path), canonical(entry), issues)


def _issue(path: str, warning: str) -> dict[str, str]:
    return {"code": "discovery_warning", "message": warning[: cards.MAX_TEXT], "path": path, "severity": "warning"}


_CLOSING = b'],"inventory":{"paths":[],"root":' + canonical(ROOT) + b'},"issues":[],"digest":"sha256:' + b'"}\n'


@dataclass
class _Document:
    """One snapshot document as it is written: its pieces in order, its exact size and its digest."""

    context: cards.Context
    paths: list[str] = field(default_factory=list)
    digest: str = ""
    _inventory: list[bytes] = field(default_factory=list)
    _issues: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        context = self.context
        head = {"schema_version": cards.PROFILE, "publisher": context.publisher, "generator": GENERATOR}
        self.opening = b"{" + canonical({**head, "source": context.source})[1:-1] + b',"complete":true,"entries":['
        self.empty = len(self.opening) + len(_CLOSING) + _DIGEST_HEX
        self.size = self.empty
        self._hash = hashlib.sha256(b'{"complete":true,"entries":[')

    def grow(self, made: _Made) -> int:
        """How many bytes adding `made` would add."""
        return made.alone + (2 if self.paths else 0) + (1 if self._issues and made.issues else 0)

    def add(self, made: _Made) -> bytes:
        """Take `made`; returns its piece of the body."""
        self.size += self.grow(made)
        piece = b"," + made.body if self.paths else made.body
        self._hash.update(piece)
        self.paths.append(made.name)
        self._inventory.append(made.path)
        self._issues += made.issues
        return piece

    def close(self) -> bytes:
        """The rest of the body, and the digest set."""
        inventory = b'{"paths":[' + b",".join(self._inventory) + b'],"root":' + canonical(ROOT) + b"}"
        issues = b"[" + b",".join(self._issues) + b"]"
        context = self.context
        self._hash.update(
            b'],"generator":' + canonical(GENERATOR) + b',"inventory":' + inventory + b',"issues":' + issues
        )
        self._hash.update(
            b',"publisher":' + canonical(context.publisher) + b',"schema_version":' + canonical(cards.PROFILE)
        )
        self._hash.update(b',"source":' + canonical(context.source) + b"}")
        self.digest = "sha256:" + self._hash.hexdigest()
        return b'],"inventory":' + inventory + b',"issues":' + issues + b',"digest":"' + self.digest.encode() + b'"}\n'


def _shard(
    factory: sessionmaker[Session], settings: HubSettings, plan: Plan, start: int, limit: int | None
) -> Iterator[bytes]:
    """The pieces of the shard that starts at plan position `start`; no limit: every entry from there."""
    context = _context(settings, plan.revision)
    document = _Document(context)
    yield document.opening
    for made in _entries(factory, context, plan, start):
        if limit is not None and document.empty + made.alone > limit:
            _too_large(made, document.empty, limit)
            continue
        if limit is not None and document.size + document.grow(made) > limit:
            break
        yield document.add(made)
    yield document.close()


def _chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    buffer = bytearray()
    for piece in pieces:
        buffer += piece
        if len(buffer) >= CHUNK:  # a server hops threads per chunk: few large ones, not one per entry
            yield bytes(buffer)
            buffer.clear()
    if buffer:
        yield bytes(buffer)


async def stream_in_thread(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks` made in ONE worker thread and handed over through a short queue.

    A plain generator given to a streaming response is advanced on whichever pool thread is free,
    chunk after chunk; each thread's allocator keeps its own arena, so memory grew with the number
    of threads it wandered over. One producer thread keeps it flat; the queue bounds what waits.
    """
    pieces: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in chunks:
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
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:  # a reader that went away: the open database session ends now
                close()

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
