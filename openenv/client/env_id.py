"""Env ids: `owner/name[@revision]`, parsed by `parse_env_id` and written back by `format_env_id`.

A revision is a branch, a tag, a commit sha, or an image digest `sha256:<64 hex>`. A full
40-hex commit sha and a digest are *pins*: they always name the same image (a tag can move).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from openenv.errors import ConfigurationError

__all__ = ["EnvId", "format_env_id", "is_digest", "parse_env_id"]

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


def is_digest(revision: str | None) -> bool:
    """Whether `revision` is an image digest `sha256:<64 lowercase hex>`."""
    return bool(revision) and _DIGEST.match(revision or "") is not None


class EnvId(NamedTuple):
    owner: str
    name: str
    revision: str | None = None

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def digest(self) -> str | None:
        """The image digest this id pins (`sha256:...`), or None."""
        return self.revision if is_digest(self.revision) else None

    @property
    def pinned(self) -> bool:
        """Whether the id always names the same image: pinned by a full commit sha or a digest."""
        return self.digest is not None or bool(self.revision and _FULL_SHA.match(self.revision))

    def __str__(self) -> str:
        return format_env_id(self)


def parse_env_id(text: str, revision: str | None = None) -> EnvId:
    """`"owner/name@rev"` → EnvId. A `revision` argument wins over one in the text only when they agree.

    Raises:
        ConfigurationError: not of the form owner/name[@revision], or two different revisions.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError("an env id looks like 'owner/name' or 'owner/name@revision'")
    repo, sep, pinned = text.strip().partition("@")
    if sep and not pinned:
        raise ConfigurationError(
            f"{text!r} ends with '@' but names no revision; write owner/name@<branch, tag or commit>"
        )
    owner, slash, name = repo.partition("/")
    if not slash or not _PART.match(owner) or not _PART.match(name) or "/" in name:
        raise ConfigurationError(
            f"{text!r} is not an env id; write it as owner/name[@revision], e.g. 'openenv/echo_env@main'"
        )
    pinned, revision = _canonical(pinned, text), _canonical(revision or "", text)
    if pinned and revision and pinned != revision:
        raise ConfigurationError(
            f"{text!r} pins revision {pinned!r} but revision={revision!r} was also given; pass one"
        )
    return EnvId(owner, name, pinned or revision or None)


def _canonical(revision: str, text: str) -> str:
    """A digest pin in its one spelling (lowercase hex); other revisions as given."""
    if revision[:7].lower() != "sha256:":
        return revision
    digest = revision.lower()
    if not _DIGEST.match(digest):
        raise ConfigurationError(
            f"{text!r}: an image digest is 'sha256:' and 64 hex digits (0-9, a-f); copy it whole from "
            "the Hub's resolve record or `openenv lock`"
        )
    return digest


def format_env_id(env_id: EnvId) -> str:
    """The inverse of `parse_env_id`."""
    return f"{env_id.owner}/{env_id.name}" + (f"@{env_id.revision}" if env_id.revision else "")
