"""Env ids: `owner/name[@revision]`, parsed by `parse_env_id` and written back by `format_env_id`."""

from __future__ import annotations

import re
from typing import NamedTuple

from openenv.errors import ConfigurationError

__all__ = ["EnvId", "format_env_id", "parse_env_id"]

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class EnvId(NamedTuple):
    owner: str
    name: str
    revision: str | None = None

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"

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
    if pinned and revision and pinned != revision:
        raise ConfigurationError(
            f"{text!r} pins revision {pinned!r} but revision={revision!r} was also given; pass one"
        )
    return EnvId(owner, name, pinned or revision or None)


def format_env_id(env_id: EnvId) -> str:
    """The inverse of `parse_env_id`."""
    return f"{env_id.owner}/{env_id.name}" + (f"@{env_id.revision}" if env_id.revision else "")
