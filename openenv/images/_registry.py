"""Asking an image's registry itself whether it has the image, by its HTTP status (Docker's
registry API, v2): the one answer about a base image that a build cannot forge, and the one that
tells "no such image" (the Dockerfile's mistake) from "no registry answers" (the machine's)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Literal

__all__ = ["RegistryAnswer", "ask_registry", "image_parts"]

Kind = Literal["exists", "missing", "refused", "unreachable", "trouble"]

_MANIFESTS = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


@dataclass(frozen=True)
class RegistryAnswer:
    """What the registry said: `exists` (200), `missing` (404, or another definite 4xx), `refused`
    (401/403 to an anonymous pull: private, or absent: Docker Hub answers so for a repository that
    does not exist), `unreachable` (no connection: DNS, refused, timed out) or `trouble` (429, 5xx)."""

    kind: Kind
    detail: str

    @property
    def envs_fault(self) -> bool:
        """The registry answered that it will not serve the image: the Dockerfile names one nobody can pull."""
        return self.kind in ("missing", "refused")


def image_parts(image: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of an image reference, as the engine reads it."""
    name, ref = image, "latest"
    if "@" in name:
        name, ref = name.split("@", 1)
    elif ":" in name.rsplit("/", 1)[-1]:
        name, ref = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, repo = first, rest
    else:
        host, repo = "registry-1.docker.io", name if "/" in name else f"library/{name}"
    if host in ("docker.io", "index.docker.io"):
        host = "registry-1.docker.io"
    return host, repo, ref


def _plain_http(host: str) -> bool:
    """Registries the engine speaks plain HTTP to by default (its insecure range: this machine)."""
    return bool(re.match(r"(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$", host))


def ask_registry(image: str, timeout_s: float = 10.0) -> RegistryAnswer:
    """Ask `image`'s registry for its manifest, anonymously, as `docker pull` would."""
    host, repo, ref = image_parts(image)
    scheme = "http" if _plain_http(host) else "https"
    url = f"{scheme}://{host}/v2/{repo}/manifests/{ref}"
    try:
        status, challenge = _head(url, None, timeout_s)
        if status == 401 and challenge.lower().startswith("bearer "):
            token = _anonymous_token(challenge, repo, timeout_s)
            if isinstance(token, RegistryAnswer):
                return token
            status, challenge = _head(url, token, timeout_s)
    except (urllib.error.URLError, OSError) as exc:
        why = getattr(exc, "reason", exc)
        return RegistryAnswer("unreachable", f"{host} does not answer ({why})")
    return _answer(host, status)


def _answer(host: str, status: int) -> RegistryAnswer:
    said = f"{host} answered HTTP {status}"
    if status == 200:
        return RegistryAnswer("exists", said)
    if status in (401, 403):
        return RegistryAnswer(
            "refused", f"{said}: it does not serve this image to anonymous pulls (private, or absent)"
        )
    if status == 429 or status >= 500:
        return RegistryAnswer("trouble", said)
    if status == 404:
        return RegistryAnswer("missing", f"{said}: no such image")
    return RegistryAnswer("missing", said) if 400 <= status < 500 else RegistryAnswer("trouble", said)


def _head(url: str, token: str | None, timeout_s: float) -> tuple[int, str]:
    headers = {"Accept": _MANIFESTS}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method="HEAD", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return int(reply.status), ""
    except urllib.error.HTTPError as exc:
        return int(exc.code), str(exc.headers.get("WWW-Authenticate") or "")


def _anonymous_token(challenge: str, repo: str, timeout_s: float) -> str | RegistryAnswer:
    """The token a Bearer challenge's realm gives an anonymous client for pulling `repo`."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = fields.get("realm")
    if not realm:
        return RegistryAnswer("trouble", "the registry asked for a token without saying where to get one")
    query = {"scope": fields.get("scope") or f"repository:{repo}:pull"}
    if fields.get("service"):
        query["service"] = fields["service"]
    url = f"{realm}?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            body = json.loads(reply.read(1 << 20) or b"{}")
    except urllib.error.HTTPError as exc:
        return _answer(urllib.parse.urlsplit(realm).netloc, int(exc.code))
    except (ValueError, urllib.error.URLError, OSError) as exc:
        return RegistryAnswer("unreachable", f"the registry's token service does not answer ({exc})")
    token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
    return str(token) if token else RegistryAnswer("trouble", "the registry's token service gave no token")
