"""The client side of the OpenEnv Hub service's resolve record (docs/hub-api.md, "Resolve").

    GET {OPENENV_HUB_URL}/api/v1/envs/{owner}/{name}/resolve?revision=REV
    → {"repo_id", "revision": <sha>, "status", "stage", "url": <running Space or null>,
       "image": <reference or null>, "port": <its server's port in the image>, "source", "local": {...}, "yanked",
       "capacity": <the revision's capacity card or null>}

A blocking stdlib request (`urllib`), run in a worker thread: the client's base install has no
HTTP library, and this is one small GET per `from_hub`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HubRecord", "HubServiceError", "fetch_record", "sessions_held"]


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

    @property
    def sessions_held(self) -> int | None:
        """Concurrent sessions one server of this revision held in the Hub's smoke test, if measured."""
        return sessions_held(self.capacity)


def sessions_held(capacity: dict[str, Any] | None) -> int | None:
    """A capacity card's `sessions_held` when it is a positive whole number, else None."""
    held = (capacity or {}).get("sessions_held")
    return held if isinstance(held, int) and not isinstance(held, bool) and held > 0 else None


def fetch_record(
    hub_url: str, repo_id: str, revision: str | None, *, token: str | None, timeout_s: float = 10.0
) -> HubRecord:
    """Ask the service for `repo_id`'s record.

    Raises:
        HubServiceError: unreachable, unknown env (404), an error status, or a malformed record.
    """
    query = f"?{urllib.parse.urlencode({'revision': revision})}" if revision else ""
    url = f"{hub_url}/api/v1/envs/{urllib.parse.quote(repo_id, safe='/')}/resolve{query}"
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    )
    # No proxies: the service is usually local or in-cluster, and a proxy would only get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as reply:
            body = json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        detail = _detail(exc.read())
        if exc.code == 404:
            raise HubServiceError(f"{hub_url} does not know {repo_id} (404{': ' + detail if detail else ''})") from None
        raise HubServiceError(f"{hub_url} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise HubServiceError(f"{hub_url} is unreachable ({getattr(exc, 'reason', exc)})") from None
    except ValueError:
        raise HubServiceError(f"{hub_url} answered with something that is not JSON") from None
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
    )


def _detail(raw: bytes) -> str:
    """The message of an error reply (`detail` or `message` of a JSON body, else its text)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:300].decode(errors="replace").strip()
    if isinstance(body, dict):
        for key in ("detail", "message", "error"):
            if isinstance(body.get(key), str):
                return body[key]
    return str(body)[:300]
