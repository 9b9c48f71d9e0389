"""Untrusted card data, made safe to store: coerced to the catalog's types, cut to its column sizes.

A Space's card (README front matter) and listing are written by whoever owns the Space. Whatever
they hold, one Space must never fail the crawl for the others: text fields are coerced and
truncated here, and a Space whose identity (owner, name, sha) cannot be stored as it is gets
rejected with a reason, alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Any

from hub_service.catalog.models import EnvRecord
from hub_service.indexer.sources import SourceEnv, card_text

__all__ = ["MAX_DESCRIPTION", "MAX_TAGS", "Rejected", "clean"]

MAX_DESCRIPTION = 2000  # characters of a (short) description kept for the catalog
MAX_TAGS = 64
_MAX_TAG = 128
_MAX_INT = 2**31 - 1  # likes are an INTEGER column
_SHA = re.compile(r"^[0-9A-Za-z]{1,64}$")
_NAME = re.compile(r"^[^/\x00-\x1f\x7f]+$")


class Rejected(ValueError):
    """The Space cannot be stored as its source describes it; the message says why."""


def _limit(column: str) -> int:
    length = getattr(EnvRecord.__table__.c[column].type, "length", None)
    assert isinstance(length, int), column
    return length


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0
    return max(0, min(_MAX_INT, int(value) if abs(value) < 2**63 else _MAX_INT))


def _tags(value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)):
        return []
    tags = [t for t in (card_text(v, _MAX_TAG) for v in value) if t]
    return list(dict.fromkeys(tags))[:MAX_TAGS]


def clean(item: SourceEnv) -> SourceEnv:
    """A copy of `item` that fits the catalog's columns.

    Raises:
        Rejected: its owner, name or sha is not something the catalog can store.
    """
    owner, name = item.owner, item.name
    for what, value in (("owner", owner), ("name", name)):
        if not isinstance(value, str) or not _NAME.match(value) or len(value) > _limit(what):
            shown = repr(value)[:120]
            raise Rejected(
                f"its {what} {shown} is not a name the catalog can hold (at most {_limit(what)} characters, no '/' or control characters)"
            )
    if not isinstance(item.sha, str) or not _SHA.match(item.sha):
        raise Rejected(f"its revision {repr(item.sha)[:120]} is not a sha (up to 64 letters and digits)")
    modified = item.last_modified if isinstance(item.last_modified, dt.datetime) else None
    return dataclasses.replace(
        item,
        tags=_tags(item.tags),
        likes=_int(item.likes),
        private=item.private is True,
        stage=_fits(card_text(item.stage), _limit("stage")),
        subdomain=_fits(card_text(item.subdomain), _limit("subdomain")),
        host=_fits(card_text(item.host), _limit("host")),
        title=card_text(item.title, _limit("title")) or name,
        description=card_text(item.description, MAX_DESCRIPTION),
        last_modified=modified,
        location=item.location if isinstance(item.location, str) and "\x00" not in item.location else None,
    )


def _fits(value: str | None, limit: int) -> str | None:
    """A value that is useless cut short (a URL): kept whole or dropped."""
    return value if value is not None and len(value) <= limit else None
