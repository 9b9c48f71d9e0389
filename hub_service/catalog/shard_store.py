"""The catalog's shards kept on disk, one folder per catalog revision: made once, served as files.

Making the index makes every shard (one pass over the catalog, seconds for 50,000 envs), so the
index request writes each shard as it is made, with the index, into
`<data_dir>/catalog-shards/<revision>/` (`N.json`, `index.json`); every shard of that revision is
then served from its file, without reading the database again.

A revision's shards are immutable (the revision names their bytes). So a reader holding an index
gets exactly the shards it names for `catalog_shards_keep_s` after that index was last read, even
when the catalog has changed since: reading 50,000 envs in five shards takes seconds, and a large
Hub's catalog may change as often. Later, a shard of a revision that is no longer current is
refused (`catalog_changed`), as `snapshot.open_shard` does. The current revision is kept as long
as it is current; others are deleted when a new index is made, past their time or past
`KEPT_MOST`. Another process on the same data folder shares the folders (each is made aside and
renamed into place, so a folder that exists is whole).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.snapshot import Plan, build_index, make_plan, open_shard, shard_file
from hub_service.settings import HubSettings

__all__ = ["KEPT_MOST", "current_index", "open_served_shard", "store_of"]

log = logging.getLogger("hub_service.catalog")

KEPT_MOST = 4  # revision folders kept at most (the current one included): 80 MB each at 50,000 envs
STALE_BUILD_S = 3600  # a folder still being made after this long was left by a process that stopped
FILE_CHUNK = 1024 * 1024
_INDEX = "index.json"
_MAKING = ".making-"
_making = threading.Lock()  # one index made at a time in a process: a second request waits, then reads it


def store_of(settings: HubSettings) -> Path:
    """The folder that holds one folder of shards per kept catalog revision."""
    return settings.data_dir / "catalog-shards"


def current_index(factory: sessionmaker[Session], settings: HubSettings, snapshot_path: str) -> dict[str, Any]:
    """The index of the current catalog (`snapshot.build_index`), its shards made and kept on the
    first request for a revision; each read gives the shards it names `catalog_shards_keep_s` more."""
    plan = make_plan(factory, settings)
    folder = store_of(settings) / plan.revision
    index = _read_index(folder)
    if index is None:
        with _making:
            index = _read_index(folder) or _make(factory, settings, snapshot_path, plan)
    os.utime(folder)
    return index


def open_served_shard(
    factory: sessionmaker[Session], settings: HubSettings, first: str | None, revision: str | None
) -> tuple[str, Iterator[bytes]]:
    """The catalog revision and the chunks of the shard `snapshot.open_shard` names: from its kept
    file when there is one (a superseded revision's within `catalog_shards_keep_s` of its index's
    last read), else made from the database.

    Raises:
        Conflict: `revision` is neither kept nor current (reason `catalog_changed`).
    """
    store = store_of(settings)
    if revision is not None:
        kept = _open_kept(store / revision, first, settings.catalog_shards_keep_s)
        if kept is not None:
            return revision, kept
    plan = make_plan(factory, settings)
    if revision in (None, plan.revision):
        kept = _open_kept(store / plan.revision, first, None)
        if kept is not None:
            return plan.revision, kept
    return open_shard(factory, settings, first, revision, plan)


def _read_index(folder: Path) -> dict[str, Any] | None:
    try:
        index: dict[str, Any] = json.loads((folder / _INDEX).read_bytes())
    except FileNotFoundError:
        return None
    return index


def _open_kept(folder: Path, first: str | None, within_s: float | None) -> Iterator[bytes] | None:
    """The chunks of the kept shard of `folder` that starts at `first` (None: the first shard), if
    there is one and (with `within_s`) the folder's index was read at most that long ago."""
    index = _read_index(folder)
    if index is None:
        return None
    if within_s is not None and _age(folder) > within_s:
        return None
    starts = [None if n == 0 else shard["first"] for n, shard in enumerate(index["shards"])]
    if first is not None and first == index["shards"][0]["first"]:
        first = None
    if first not in starts:
        return None  # a path inside a shard: open_shard makes the shard that starts there
    try:
        handle = shard_file(folder, starts.index(first)).open("rb")
    except FileNotFoundError:  # deleted since its index was read: made from the database instead
        return None
    return _chunks(handle)


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    with handle:
        while piece := handle.read(FILE_CHUNK):
            yield piece


def _make(factory: sessionmaker[Session], settings: HubSettings, snapshot_path: str, plan: Plan) -> dict[str, Any]:
    """Every shard of `plan` and its index, made aside and renamed into the store; older folders pruned."""
    store = store_of(settings)
    store.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=_MAKING, dir=store))
    try:
        index = build_index(factory, settings, snapshot_path, plan, aside)
        (aside / _INDEX).write_text(json.dumps(index))
        try:
            aside.rename(store / plan.revision)
        except OSError:
            if _read_index(store / plan.revision) is None:
                raise  # not another process's folder of the same revision: a real failure
    finally:
        if aside.exists():
            shutil.rmtree(aside)
    _prune(store, plan.revision, settings.catalog_shards_keep_s)
    return index


def _prune(store: Path, current: str, keep_s: float) -> None:
    """Delete folders past their time (or past KEPT_MOST), and ones a stopped process left half made."""
    others = []
    for folder in store.iterdir():
        age = _age(folder)
        if folder.name.startswith(_MAKING):
            if age > STALE_BUILD_S:
                _delete(folder)
        elif folder.name != current:
            others.append((age, folder))
    others.sort()
    for n, (age, folder) in enumerate(others):
        if age > keep_s or n + 1 >= KEPT_MOST:
            log.info("catalog: deleting the kept shards of revision %s", folder.name[:12])
            _delete(folder)


def _age(folder: Path) -> float:
    """Seconds since `folder` was made or its index last read (infinite: it is gone)."""
    try:
        return time.time() - folder.stat().st_mtime
    except FileNotFoundError:
        return float("inf")


def _delete(folder: Path) -> None:
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:  # another process on the same data folder deleted it first
        return
