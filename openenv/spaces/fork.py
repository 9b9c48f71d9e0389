"""Duplicate a Space into your account (`openenv fork`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from openenv.errors import ConfigurationError
from openenv.spaces._hf import duplicate_space, hf_api, space_urls, whoami

__all__ = ["ForkResult", "fork_space", "parse_space_id"]

_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def parse_space_id(source: str) -> str:
    """`owner/name`, `spaces/owner/name`, or a Space page URL (`https://huggingface.co/spaces/owner/name`)
    → `owner/name`.

    Raises:
        ConfigurationError: not a Space id or page URL.
    """
    text = source.strip().rstrip("/")
    if "://" in text:
        parts = [p for p in urlsplit(text).path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "spaces":
            text = f"{parts[1]}/{parts[2]}"
        else:
            raise ConfigurationError(
                f"{source!r} is not a Space page URL; use owner/name or https://huggingface.co/spaces/owner/name"
            )
    text = text.removeprefix("spaces/")
    if not _ID.match(text):
        raise ConfigurationError(f"{source!r} is not a Space id; write it as owner/name")
    return text


@dataclass
class ForkResult:
    source: str
    repo_id: str
    url: str
    app_url: str
    stage: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def fork_space(
    source: str,
    *,
    repo_id: str | None = None,
    private: bool | None = None,
    hardware: str | None = None,
    variables: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> ForkResult:
    """Duplicate the Space `source` to `repo_id` (default: your user / the source's name).

    Raises:
        ConfigurationError: `source` is not a Space id or URL.
        HubRequestError: the source is missing or private, the target exists, or no write access.
    """
    src = parse_space_id(source)
    api = hf_api(endpoint, token)
    if repo_id is None or "/" not in repo_id:
        repo_id = f"{whoami(api)}/{repo_id or src.split('/')[1]}"
    duplicate_space(
        api,
        src,
        repo_id,
        private=private,
        hardware=hardware,
        variables=[{"key": k, "value": v} for k, v in (variables or {}).items()] or None,
        secrets=[{"key": k, "value": v} for k, v in (secrets or {}).items()] or None,
    )
    urls = space_urls(api, repo_id)
    return ForkResult(
        source=src,
        repo_id=repo_id,
        url=urls.page,
        app_url=urls.app,
        stage=urls.stage,
        variables=dict(variables or {}),
        secrets=sorted(secrets or {}),
    )
