"""Reading a catalog snapshot (upstream's Environment Card profile, 0.1-draft) and searching it.

The snapshot comes from a file or from a Hub service's `GET /api/v1/catalog/snapshot`; either
way its digest is checked before anything in it is believed. Search is lexical, by task: the
words of a query matched against each entry's name, description, tags, tools and the queries
its author said it answers. Nothing is fetched from the references inside.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.cli._output import CliError

__all__ = ["Match", "load_file", "load_hub", "search"]

MAX_BYTES = 256 * 1024 * 1024  # a Hub of 100,000 envs; more is not a catalog


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


def load_file(path: Path) -> dict[str, Any]:
    """A snapshot read from `path` (its digest checked)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", "pass --catalog a snapshot file") from None
    return _parse(data, str(path))


def load_hub(hub: str, timeout: float = 60.0) -> dict[str, Any]:
    """The snapshot a Hub service serves now (its digest checked)."""
    import httpx

    url = f"{hub.rstrip('/')}/api/v1/catalog/snapshot"
    data = bytearray()
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as reply:
            if reply.status_code != 200:
                raise CliError(f"{url} answered {reply.status_code}", "check --hub (an OpenEnv Hub service's base URL)")
            for chunk in reply.iter_bytes():
                data += chunk
                if len(data) > MAX_BYTES:
                    raise CliError(f"{url} sent more than {MAX_BYTES >> 20} MB", "is --hub an OpenEnv Hub service?")
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {url}: {exc}", "check --hub or OPENENV_HUB_URL, and that the Hub runs") from None
    return _parse(bytes(data), url)


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
    body = {k: v for k, v in snapshot.items() if k != "digest"}
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if snapshot.get("digest") != "sha256:" + hashlib.sha256(encoded).hexdigest():
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
    found.sort(key=lambda m: (-m.score, m.id))
    return found[:limit]
