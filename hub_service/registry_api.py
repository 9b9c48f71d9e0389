"""The Hub's own HTTP client to its registry (Docker's registry API, v2, with the Hub's
credentials): what a push through the engine cannot do or tell — what a tag holds now, deleting a
manifest, and pushing a signature artifact (blobs and a manifest) of the Hub's own.

As Docker does, a registry on this machine (localhost, 127.0.0.0/8, ::1) is spoken to in plain
HTTP, any other over HTTPS. Basic credentials are sent as they are; a registry that answers with a
Bearer challenge gets a token from its realm for the repository first (Docker Hub's way).
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import httpx

from hub_service.settings import HubSettings

__all__ = [
    "ACCEPT",
    "RegistryError",
    "base_url",
    "client",
    "delete_manifest",
    "get_blob",
    "get_manifest",
    "host_of",
    "manifest_digest",
    "push_blob",
    "put_manifest",
    "repository_of",
]

ACCEPT = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    )
)
_MAX_MANIFEST = 4 << 20
_MAX_BLOB = 4 << 20  # the Hub reads back only its own small blobs (a signature's payload)
_BEARER = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """The registry did not answer (`status` None), or answered what the Hub cannot go on with
    (`status` its HTTP status; its words in the message)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        """The registry refused the Hub's credentials (401, 403)."""
        return self.status in (401, 403)


def host_of(registry: str) -> str:
    """`host:port` of the registry setting (`host:port/namespace`)."""
    return registry.split("/", 1)[0]


def repository_of(registry_ref: str, host: str) -> str | None:
    """`owner/name` path of `<host>/<path>:<tag>` (None for an image of another registry)."""
    if not registry_ref.startswith(host + "/"):
        return None
    return registry_ref[len(host) + 1 :].rsplit(":", 1)[0]


def base_url(host: str) -> str:
    # As Docker does: plain HTTP to a registry on this machine, HTTPS to any other.
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    local = name in ("localhost", "[::1]") or name.startswith("127.")
    return f"{'http' if local else 'https'}://{host}"


class _TokenAuth(httpx.Auth):
    """Basic credentials, or, to a registry that challenges with Bearer, a token from its realm."""

    def __init__(self, user: str | None, password: str) -> None:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.basic = f"Basic {pair}" if user else None
        self.token: str | None = None

    def auth_flow(self, request: httpx.Request) -> Any:
        if self.token:
            request.headers["Authorization"] = f"Bearer {self.token}"
        elif self.basic is not None:
            request.headers["Authorization"] = self.basic
        response = yield request
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code != 401 or not challenge.lower().startswith("bearer"):
            return
        params = dict(_BEARER.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            return
        headers = {"Authorization": self.basic} if self.basic is not None else {}
        got = yield httpx.Request("GET", realm, params=params, headers=headers)
        if got.status_code == 200:
            got.read()
            body = got.json()
            self.token = body.get("token") or body.get("access_token")
            if self.token:
                request.headers["Authorization"] = f"Bearer {self.token}"
                yield request


def client(settings: HubSettings, timeout_s: float = 30.0) -> httpx.Client:
    """A client with the Hub's registry credentials (none when it has none)."""
    password = settings.registry_password.get_secret_value() if settings.registry_password else ""
    return httpx.Client(
        auth=_TokenAuth(settings.registry_user, password), timeout=timeout_s, headers={"Accept": ACCEPT}
    )


def _call(c: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        return c.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise RegistryError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


def manifest_digest(c: httpx.Client, host: str, repository: str, reference: str) -> str | None:
    """The digest of what `reference` (a tag or digest) names in `repository` now; None: it names nothing.

    Raises:
        RegistryError: no answer, or one other than found or not found.
    """
    reply = _call(c, "HEAD", f"{base_url(host)}/v2/{repository}/manifests/{reference}")
    if reply.status_code == 404:
        return None
    digest = reply.headers.get("Docker-Content-Digest")
    if reply.status_code != 200 or not digest:
        raise RegistryError(f"HEAD {repository}:{reference} answered {reply.status_code}", reply.status_code)
    return digest


def get_manifest(c: httpx.Client, host: str, repository: str, reference: str) -> tuple[str, bytes] | None:
    """(digest, bytes) of the manifest `reference` names; None when it names nothing."""
    reply = _call(c, "GET", f"{base_url(host)}/v2/{repository}/manifests/{reference}")
    if reply.status_code == 404:
        return None
    if reply.status_code != 200 or len(reply.content) > _MAX_MANIFEST:
        raise RegistryError(
            f"GET {repository}:{reference} answered {reply.status_code} {reply.text[:200]}", reply.status_code
        )
    return "sha256:" + hashlib.sha256(reply.content).hexdigest(), reply.content


def get_blob(c: httpx.Client, host: str, repository: str, digest: str) -> bytes:
    """The blob `digest`, checked against its digest."""
    reply = _call(c, "GET", f"{base_url(host)}/v2/{repository}/blobs/{digest}", follow_redirects=True)
    if reply.status_code != 200 or len(reply.content) > _MAX_BLOB:
        raise RegistryError(f"GET blob {repository}@{digest} answered {reply.status_code}", reply.status_code)
    if "sha256:" + hashlib.sha256(reply.content).hexdigest() != digest:
        raise RegistryError(f"the blob {repository}@{digest} the registry gave does not have that digest")
    return reply.content


def push_blob(c: httpx.Client, host: str, repository: str, data: bytes) -> str:
    """Upload `data` as a blob (monolithic: one POST, one PUT); returns its digest."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if _call(c, "HEAD", f"{base_url(host)}/v2/{repository}/blobs/{digest}").status_code == 200:
        return digest
    start = _call(c, "POST", f"{base_url(host)}/v2/{repository}/blobs/uploads/")
    location = start.headers.get("Location")
    if start.status_code != 202 or not location:
        raise RegistryError(
            f"starting a blob upload to {repository} answered {start.status_code} {start.text[:200]}", start.status_code
        )
    url = location if location.startswith("http") else f"{base_url(host)}{location}"
    url += ("&" if "?" in url else "?") + "digest=" + digest.replace(":", "%3A")  # beside the upload's own state
    done = _call(
        c,
        "PUT",
        url,
        content=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    if done.status_code != 201:
        raise RegistryError(
            f"uploading a blob to {repository} answered {done.status_code} {done.text[:200]}", done.status_code
        )
    return digest


def put_manifest(c: httpx.Client, host: str, repository: str, tag: str, manifest: bytes, media_type: str) -> str:
    """Store `manifest` under `tag`; returns its digest (the registry's word, checked against ours)."""
    reply = _call(
        c,
        "PUT",
        f"{base_url(host)}/v2/{repository}/manifests/{tag}",
        content=manifest,
        headers={"Content-Type": media_type},
    )
    ours = "sha256:" + hashlib.sha256(manifest).hexdigest()
    if reply.status_code != 201:
        raise RegistryError(
            f"PUT manifest {repository}:{tag} answered {reply.status_code} {reply.text[:200]}", reply.status_code
        )
    theirs = reply.headers.get("Docker-Content-Digest") or ours
    if theirs != ours:
        raise RegistryError(f"the registry stored {repository}:{tag} as {theirs}, not {ours}")
    return ours


def delete_manifest(c: httpx.Client, host: str, repository: str, digest: str) -> tuple[str, str]:
    """("deleted" | "gone" | "failed", detail) of deleting the manifest `digest` (and every tag on it)."""
    try:
        reply = _call(c, "DELETE", f"{base_url(host)}/v2/{repository}/manifests/{digest}")
    except RegistryError as exc:  # the registry is down: the next collection tries again
        return "failed", str(exc)[:500]
    if reply.status_code in (200, 202):
        return "deleted", ""
    if reply.status_code == 404:
        return "gone", ""
    hint = " (the registry must allow deletes: storage.delete.enabled)" if reply.status_code == 405 else ""
    return "failed", f"{reply.status_code} {reply.text[:300]}{hint}"
