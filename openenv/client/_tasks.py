"""The client's Task API: the splits and tasks of an environment that has a task set (upstream
OpenEnv 0.10.0's HTTP routes), over plain HTTP beside the session's WebSocket. Pick a task with
`reset(split=..., index=...)`.

The client's base install has no HTTP library: these are small stdlib requests, run in a worker
thread so the event loop never waits on them.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from openenv.errors import EnvConnectionError, EnvServerError, NoTasksError, ProtocolError

__all__ = ["TasksMixin", "http_base"]

_METHOD_OF = {
    "splits": "list_splits",
    "tasks": "list_tasks",
    "num_tasks": "num_tasks",
    "task": "get_task",
    "task_range": "get_task_range",
}


def http_base(base_url: str) -> str:
    """`ws(s)://host/prefix[/ws]` or `http(s)://...` → `http(s)://host/prefix`."""
    parts = urllib.parse.urlsplit(base_url.strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme.lower(), parts.scheme.lower())
    path = parts.path.rstrip("/")
    path = path[: -len("/ws")] if path.endswith("/ws") else path
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))


class TasksMixin:
    """`list_splits`, `list_tasks`, `num_tasks`, `get_task`, `get_task_range` for `EnvClient`."""

    base_url: str
    message_timeout_s: float | None
    _headers: dict[str, str]
    _env_name: str | None = None

    async def list_splits(self) -> list[Any]:
        """The environment's task splits, each `{"name", "type"}` (type: train, validation, test).

        Raises:
            NoTasksError: the environment has no task set.  EnvConnectionError: no server there.
        """
        return list(await self._task_call("GET", "splits", None))

    async def list_tasks(self, split: str) -> list[Any]:
        """Every task of `split`.

        Raises:
            NoTasksError, EnvServerError (404: no such split), EnvConnectionError.
        """
        return list((await self._task_call("POST", "tasks", {"split": split}))["tasks"])

    async def num_tasks(self, split: str) -> int:
        """How many tasks `split` has."""
        return int((await self._task_call("POST", "num_tasks", {"split": split}))["num_tasks"])

    async def get_task(self, split: str, index: int) -> Any:
        """Task `index` of `split` (`reset(split=split, index=index)` plays it).

        Raises:
            EnvServerError: 400 when `index` is outside the split, 404 for an unknown split.
        """
        return (await self._task_call("POST", "task", {"split": split, "index": index}))["task"]

    async def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        """Tasks `start` to `stop` of `split` (a slice: None means from the first / to the last)."""
        body: dict[str, Any] = {"split": split}
        if start is not None:
            body["start"] = start
        if stop is not None:
            body["stop"] = stop
        return list((await self._task_call("POST", "task_range", body))["tasks"])

    async def _task_call(self, method: str, route: str, body: dict[str, Any] | None) -> Any:
        base = http_base(self.base_url)
        if self._env_name is None:
            names = await asyncio.to_thread(self._http, "GET", f"{base}/list_environments", None, route)
            if not isinstance(names, list) or not names or not isinstance(names[0], str):
                raise ProtocolError(
                    f"GET /list_environments did not name the environment ({str(names)[:120]}) [{self.base_url}]",
                    code="UNEXPECTED_REPLY",
                    url=self.base_url,
                )
            self._env_name = names[0]
        url = f"{base}/{urllib.parse.quote(self._env_name, safe='')}/{route}"
        return await asyncio.to_thread(self._http, method, url, body, route)

    def _http(self, method: str, url: str, body: dict[str, Any] | None, route: str) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {
            **self._headers,
            "Accept": "application/json",
            **({"Content-Type": "application/json"} if data else {}),
        }
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=self.message_timeout_s or 60.0) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            detail = _detail(exc.read())
            if exc.code == 501 or (
                exc.code == 404 and url.endswith("/list_environments")
            ):  # 404 there: no Task API (0.3.0)
                raise NoTasksError(_METHOD_OF.get(route, route)) from None
            raise EnvServerError(
                f"{method} /{route} answered {exc.code}: {detail} [{self.base_url}]",
                code=f"HTTP_{exc.code}",
                url=self.base_url,
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise EnvConnectionError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}", url=self.base_url) from None
        except ValueError:
            raise ProtocolError(
                f"{method} /{route} answered something that is not JSON [{self.base_url}]",
                code="INVALID_JSON",
                url=self.base_url,
            ) from None


def _detail(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:300].decode(errors="replace").strip()
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return detail
    return str(body)[:300]
