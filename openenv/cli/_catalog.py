"""Reading a catalog snapshot (upstream's Environment Card profile, 0.1-draft) and searching it.

The snapshot comes from a file, or from a Hub service: its index (`GET /api/v1/catalog/index`)
names the shards the catalog is served in (each a complete snapshot within the 16 MiB upstream's
reader takes; one, the whole catalog, while it fits), each with its digest. Every document's own
digest is checked before anything in it is believed, and each shard's against the digest its index
names. Shards are searched one at a time, so memory holds one shard and the best matches so far.
Search is lexical, by task: the words of a query matched against each entry's name, description,
tags, tools and the queries its author said it answers. Nothing is fetched from the references inside.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.cli._output import CliError

if TYPE_CHECKING:
    import httpx

__all__ = ["Found", "Match", "load_file", "search", "search_hub"]

MAX_BYTES = 256 * 1024 * 1024  # a Hub of 100,000 envs; more is not a catalog
MAX_INDEX_BYTES = 32 * 1024 * 1024
ATTEMPTS = 3  # reads of the index, when the catalog changes while its shards are read
_ALTERED = (
    "the catalog changed while it was read, or something between you and the Hub altered it: "
    "run the command again, and tell the Hub's operator if it persists"
)


@dataclass(frozen=True)
class Match:
    entry: dict[str, Any]
    score: int

    @property
    def hub(self) -> dict[str, Any]:
        meta = self.entry.get("metadata")
        hub = meta.get("hub") if isinstance(meta, dict) else None
        return hub if isinstance(hub, dict) else {}

    @property
    def id(self) -> str:
        return str(self.hub.get("id") or self.entry.get("displayName") or self.entry.get("identifier"))


@dataclass(frozen=True)
class Found:
    """What a search of a whole catalog found."""

    matches: list[Match]
    envs: int  # the entries searched
    digest: str  # what was read: the snapshot's digest; for a catalog in shards, its index's
    shards: int = 1


def load_file(path: Path) -> dict[str, Any]:
    """A snapshot read from `path` (its digest checked)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", "pass --catalog a snapshot file") from None
    return _parse(data, str(path))


def search_hub(
    hub: str,
    query: str,
    *,
    tags: list[str] | None = None,
    checks: list[str] | None = None,
    limit: int = 20,
    timeout: float = 60.0,
) -> Found:
    """`search` over the catalog a Hub service serves now: every shard its index names, each
    checked against its own digest and the index's (a Hub without an index: its one snapshot).

    Raises:
        CliError: the Hub cannot be reached or answers wrongly; a shard is not the one its index
            names; the catalog kept changing while it was read.
    """
    import httpx

    base = hub.rstrip("/")
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:
        for _ in range(ATTEMPTS):
            try:
                return _search_hub(client, base, query, tags, checks, limit)
            except _Changed:
                continue
    raise CliError(f"the catalog of {base} changed each of {ATTEMPTS} times it was read", "run the command again")


class _Changed(Exception):
    """The Hub's catalog changed since its index was read (409 `catalog_changed`)."""


def _search_hub(
    client: httpx.Client, base: str, query: str, tags: list[str] | None, checks: list[str] | None, limit: int
) -> Found:
    from urllib.parse import urljoin

    index_url = f"{base}/api/v1/catalog/index"
    status, data = _get(client, index_url, MAX_INDEX_BYTES)
    if status == 404:  # a Hub from before the index: the catalog is its one snapshot
        url = f"{base}/api/v1/catalog/snapshot"
        status, data = _get(client, url, MAX_BYTES)
        _answered(status, url)
        snapshot = _parse(data, url)
        found = search(snapshot, query, tags=tags, checks=checks, limit=limit)
        return Found(found, len(snapshot["entries"]), str(snapshot["digest"]))
    _answered(status, index_url)
    index = _index(data, index_url)
    shards: list[dict[str, Any]] = index["shards"]
    matches: list[Match] = []
    envs = 0
    for n, shard in enumerate(shards, 1):
        url = urljoin(index_url, shard["url"])
        where = f"shard {n} of {len(shards)} ({url})"
        too_large = f"{where} is larger than the {shard['bytes']} bytes its index names"
        status, data = _get(client, url, shard["bytes"], too_large)
        if status == 409 and _reason(data) == "catalog_changed":
            raise _Changed
        _answered(status, url)
        snapshot = _parse(data, where)
        if snapshot["digest"] != shard["digest"]:
            raise CliError(
                f"{where} is not the shard its index names: its digest is {snapshot['digest']}, "
                f"the index names {shard['digest']}",
                _ALTERED,
            )
        envs += len(snapshot["entries"])
        found = search(snapshot, query, tags=tags, checks=checks, limit=limit)
        matches = sorted([*matches, *found], key=_rank)[:limit]
    if envs != index["envs"]:
        raise CliError(f"{index_url} counts {index['envs']} envs, its shards hold {envs}", "run the command again")
    digest = shards[0]["digest"] if len(shards) == 1 else index["digest"]
    return Found(matches, envs, str(digest), len(shards))


def _get(client: httpx.Client, url: str, most: int, too_large: str | None = None) -> tuple[int, bytes]:
    """The status and body of GET `url`, refused past `most` bytes (with `too_large` as the reason)."""
    import httpx

    data = bytearray()
    try:
        with client.stream("GET", url) as reply:
            for chunk in reply.iter_bytes():
                data += chunk
                if len(data) > most and reply.status_code != 200:
                    break  # an error's body: its start says what went wrong
                if len(data) > most and too_large:
                    raise CliError(too_large, _ALTERED)
                if len(data) > most:
                    raise CliError(f"{url} sent more than {most >> 20} MB", "is --hub an OpenEnv Hub service?")
            return reply.status_code, bytes(data)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {exc}", "check --hub or OPENENV_HUB_URL, and that the Hub runs") from None


def _answered(status: int, url: str) -> None:
    if status != 200:
        raise CliError(f"{url} answered {status}", "check --hub (an OpenEnv Hub service's base URL)")


def _reason(data: bytes) -> str | None:
    try:
        error = json.loads(data)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return error.get("reason") if isinstance(error, dict) else None


def _index(data: bytes, where: str) -> dict[str, Any]:
    """The catalog index in `data`, its shape and digest checked."""
    try:
        index = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        index = None
    wrong = CliError(f"{where} is not an OpenEnv Hub catalog index", "check --hub (an OpenEnv Hub service's base URL)")
    if not isinstance(index, dict) or not isinstance(index.get("shards"), list) or not index["shards"]:
        raise wrong
    for shard in index["shards"]:
        if not (
            isinstance(shard, dict)
            and isinstance(shard.get("url"), str)
            and isinstance(shard.get("digest"), str)
            and isinstance(shard.get("bytes"), int)
            and 0 < shard["bytes"] <= MAX_BYTES
        ):
            raise wrong
    if not isinstance(index.get("envs"), int) or index.get("digest") != _digest_of(index):
        raise CliError(f"{where}: its content does not match its digest", "run the command again")
    return index


def _digest_of(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "digest"}
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _parse(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > MAX_BYTES:
        raise CliError(f"{where} is larger than {MAX_BYTES >> 20} MB", "is it a catalog snapshot?")
    try:
        snapshot = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CliError(
            f"{where} is not a JSON catalog snapshot", "export one with `openenv hub export-catalog`"
        ) from None
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("entries"), list):
        raise CliError(
            f"{where} is not a catalog snapshot (no entries)", "export one with `openenv hub export-catalog`"
        )
    if snapshot.get("digest") != _digest_of(snapshot):
        raise CliError(f"{where}: its content does not match its digest", "fetch or export the snapshot again")
    return snapshot


def _words(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", text.casefold()))


def _text(entry: dict[str, Any]) -> str:
    parts: list[Any] = [entry.get("displayName"), entry.get("description")]
    data = entry.get("data")
    if isinstance(data, dict):
        parts.append(data.get("name"))
    for key in ("tags", "capabilities", "representativeQueries"):
        value = entry.get(key)
        parts += value if isinstance(value, list) else []
    return " ".join(p for p in parts if isinstance(p, str))


def search(
    snapshot: dict[str, Any],
    query: str,
    *,
    tags: list[str] | None = None,
    checks: list[str] | None = None,
    limit: int = 20,
) -> list[Match]:
    """Entries sharing words with `query` (every entry for an empty one), best first; with
    `checks`, only those whose Hub report says each of these RFC 008 check ids passed.

    The score is the share of the query's words an entry has, 0 to 100; ties go by id.
    """
    from openenv.validation.rfc008 import read_check_summary

    wanted = _words(query)
    found = []
    for entry in snapshot["entries"]:
        if not isinstance(entry, dict):
            continue
        if tags and not set(tags) <= set(entry.get("tags") or []):
            continue
        if checks:
            statuses = read_check_summary(Match(entry, 0).hub.get("checks"))
            if any(statuses.get(c) != "pass" for c in checks):
                continue
        shared = wanted & _words(_text(entry))
        if wanted and not shared:
            continue
        found.append(Match(entry, round(100 * len(shared) / len(wanted)) if wanted else 0))
    found.sort(key=_rank)
    return found[:limit]


def _rank(match: Match) -> tuple[int, str]:
    return -match.score, match.id
