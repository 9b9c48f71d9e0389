"""The client side of the OpenEnv Hub service's resolve record (docs/hub-api.md, "Resolve").

    GET {OPENENV_HUB_URL}/api/v1/envs/{owner}/{name}/resolve?revision=REV
    → {"repo_id", "revision": <sha>, "status", "stage", "url": <running Space or null>,
       "image": <reference or null>, "image_digest": <sha256:... or null>, "image_tag": <tag or null>,
       "port": <its server's port in the image>, "source", "local": {"container": <command>, ...}, "yanked",
       "capacity": <the revision's capacity card or null>}

A blocking stdlib request (`urllib`), run in a worker thread: the client's base install has no
HTTP library, and this is one small GET per `from_hub`.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HubRecord", "HubServiceError", "fetch_record", "register_lock", "sessions_held"]


class HubServiceError(Exception):
    """The service did not give a usable record; the message says what it answered."""


@dataclass(frozen=True)
class HubRecord:
    """A resolve record: where the env runs now (`url`), how to run it (`image`), and the
    revision's capacity card as the Hub measured it (`capacity`, None when not measured)."""

    repo_id: str
    sha: str | None
    url: str | None
    image: str | None
    stage: str | None = None
    status: str | None = None
    port: int = 8000
    raw: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] | None = None
    # When the Hub pushed the tested image to its registry: `image` is `<registry>/<owner>/<name>@<digest>`,
    # `image_digest` that digest (`sha256:...`, which the pulled image must carry) and `image_tag` the human tag.
    image_digest: str | None = None
    image_tag: str | None = None
    yanked: bool = False
    # The command that runs the image in a local container (`local.container`; an older Hub's `local.docker`).
    container_command: str | None = None

    @property
    def sessions_held(self) -> int | None:
        """Concurrent sessions one server of this revision held in the Hub's smoke test, if measured."""
        return sessions_held(self.capacity)


def sessions_held(capacity: dict[str, Any] | None) -> int | None:
    """A capacity card's `sessions_held` when it is a positive whole number, else None."""
    held = (capacity or {}).get("sessions_held")
    return held if isinstance(held, int) and not isinstance(held, bool) and held > 0 else None


def fetch_record(
    hub_url: str,
    repo_id: str,
    revision: str | None,
    *,
    token: str | None,
    timeout_s: float = 10.0,
    lock: str | None = None,
) -> HubRecord:
    """Ask the service for `repo_id`'s record (`lock`: the id of the lock file it is resolved
    through, which the service then keeps alive).

    Raises:
        HubServiceError: unreachable, unknown env (404), an error status, or a malformed record.
    """
    params = {k: v for k, v in (("revision", revision), ("lock", lock)) if v}
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    endpoint = f"{hub_url}/api/v1/envs/{urllib.parse.quote(repo_id, safe='/')}/resolve{query}"
    request = urllib.request.Request(
        endpoint, headers={"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    )

    def refused(code: int, detail: str) -> str:
        if code == 404:
            return f"{hub_url} does not know {repo_id} (404{': ' + detail if detail else ''})"
        return f"{hub_url} answered {code}: {detail}"

    body = _json_reply(request, hub_url, timeout_s, refused)
    if not isinstance(body, dict) or not isinstance(body.get("repo_id"), str):
        raise HubServiceError(f"{hub_url} answered something that is not a resolve record (no repo_id)")
    url, image, port = body.get("url"), body.get("image"), body.get("port")
    return HubRecord(
        repo_id=body["repo_id"],
        sha=body.get("revision"),
        url=url if isinstance(url, str) and url else None,
        image=image if isinstance(image, str) and image else None,
        stage=body.get("stage"),
        status=body.get("status"),
        port=port if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536 else 8000,
        raw=body,
        capacity=body["capacity"] if isinstance(body.get("capacity"), dict) else None,
        image_digest=_digest(body.get("image_digest"), hub_url),
        image_tag=body["image_tag"] if isinstance(body.get("image_tag"), str) and body["image_tag"] else None,
        yanked=body.get("yanked") is True,
        container_command=_container_command(body.get("local")),
    )


def _container_command(local: Any) -> str | None:
    """A record's `local.container`, else `local.docker` (its name before; Hubs send both for one release)."""
    if not isinstance(local, dict):
        return None
    for key in ("container", "docker"):
        value = local.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _digest(value: Any, hub_url: str) -> str | None:
    """A record's `image_digest`: None, or `sha256:` and 64 hex digits (anything else is refused)."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", value):
        raise HubServiceError(f"{hub_url} answered an image_digest that is not sha256:<64 hex digits>: {value!r:.100}")
    return value


def _detail(raw: bytes) -> str:
    """The message of an error reply (`detail` or `message` of a JSON body, else its text)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:300].decode(errors="replace").strip()
    if isinstance(body, dict) and isinstance(body.get("error"), dict):  # the Hub's {"error": {"message": ...}}
        body = body["error"]
    if isinstance(body, dict):
        for key in ("detail", "message", "error"):
            value = body.get(key)
            if isinstance(value, str):
                return value
    return str(body)[:300]


def register_lock(
    hub_url: str, document: dict[str, Any], *, token: str | None = None, timeout_s: float = 10.0
) -> dict[str, Any]:
    """POST a lock file's document to the service (`/api/v1/locks`), which keeps its images; returns its reply.
    The service asks the Hugging Face Hub whose `token` it is (a lock counts against its user's quota).

    Raises:
        HubServiceError: unreachable, the lock refused (the message says why), or a malformed reply.
    """
    request = urllib.request.Request(
        f"{hub_url}/api/v1/locks",
        data=json.dumps(document).encode(),
        headers={
            "Accept": "application/json",
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
        method="POST",
    )
    body = _json_reply(
        request, hub_url, timeout_s, lambda code, detail: f"{hub_url} refused the lock ({code}: {detail})"
    )
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise HubServiceError(f"{hub_url} answered something that is not a registered lock (no id)")
    return body


def _json_reply(
    request: urllib.request.Request, hub_url: str, timeout_s: float, refused: Callable[[int, str], str]
) -> Any:
    """The service's JSON reply to `request`; an error status is worded by `refused(code, detail)`.

    Raises:
        HubServiceError: unreachable, an error status, or a reply that is not JSON.
    """
    # No proxies: the service is usually local or in-cluster, and a proxy would only get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raise HubServiceError(refused(exc.code, _detail(exc.read()))) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise HubServiceError(f"{hub_url} is unreachable ({getattr(exc, 'reason', exc)})") from None
    except ValueError:
        raise HubServiceError(f"{hub_url} answered with something that is not JSON") from None
