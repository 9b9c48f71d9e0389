"""The client side of the OpenEnv Hub service's resolve record (docs/from_hub.md).

    GET {OPENENV_HUB_URL}/api/v1/envs/{owner}/{name}/resolve?revision=REV

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

__all__ = ["HubRecord", "HubServiceError", "fetch_record"]


class HubServiceError(Exception):
    """The service did not give a usable record; the message says what it answered."""


@dataclass(frozen=True)
class HubRecord:
    """A resolve record: where the env runs now and how to run it."""

    repo_id: str
    revision: str | None
    sha: str | None
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    image: str | None = None
    port: int = 8000
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def live_urls(self) -> list[str]:
        """Endpoint URLs the service last saw running, in its order of preference."""
        return [str(e["url"]) for e in self.endpoints if isinstance(e, dict) and e.get("url") and e.get("status", "running") == "running"]


def fetch_record(hub_url: str, repo_id: str, revision: str | None, *, token: str | None, timeout_s: float = 10.0) -> HubRecord:
    """Ask the service for `repo_id`'s record.

    Raises:
        HubServiceError: unreachable, unknown env (404), an error status, or a malformed record.
    """
    query = f"?{urllib.parse.urlencode({'revision': revision})}" if revision else ""
    url = f"{hub_url}/api/v1/envs/{urllib.parse.quote(repo_id, safe='/')}/resolve{query}"
    request = urllib.request.Request(url, headers={"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})})
    # No proxies: the service is usually local or in-cluster, and a proxy would only get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as reply:
            body = json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode(errors="replace")
        if exc.code == 404:
            raise HubServiceError(f"{hub_url} does not know {repo_id} (404)") from None
        raise HubServiceError(f"{hub_url} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise HubServiceError(f"{hub_url} is unreachable ({getattr(exc, 'reason', exc)})") from None
    except ValueError:
        raise HubServiceError(f"{hub_url} answered with something that is not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("endpoints", []), list):
        raise HubServiceError(f"{hub_url} answered a record without an 'endpoints' list")
    image = body.get("image")
    if isinstance(image, dict):
        image = image.get("reference")
    return HubRecord(repo_id=str(body.get("repo_id") or repo_id), revision=body.get("revision"), sha=body.get("sha"),
                     endpoints=list(body.get("endpoints") or []), image=image if isinstance(image, str) else None,
                     port=int(body.get("port") or 8000), raw=body)
