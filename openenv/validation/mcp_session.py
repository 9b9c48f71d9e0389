"""An episode's client on the MCP session path: the way upstream 0.10.0's `MCPToolClient` speaks to
an MCP env, for the episode `openenv.validation.paths` plays beside the plain `/ws` one.

The path, as upstream's client walks it (and as our server serves it, openenv/server/mcp.py):

1. `POST /mcp` `{"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}`
   answers `{"result": {"session_id": ID}}`: a session (an env instance) the server keeps across
   requests; at capacity, a JSON-RPC error whose `data` has `max_sessions`.
2. `/ws?session_id=ID` attaches a WebSocket to that session, for `reset` and `state`.
3. `tools/list` and `tools/call` go as `POST /mcp` with `params.session_id = ID`, and run on the
   server's own event loop, where the session's tool client is open. A tool call made so is not a
   `step` frame: it earns no reward and ends no episode.
4. Closing: the WebSocket first, then `openenv/session/close` with the id.

`McpSessionClient` offers what `play_episode` asks of a client (`reset`, `list_tools`, `step`,
`state`, `close`, `base_url`); its `step` takes a tool-call action (`tool_name`, `arguments`) and
sends it as `tools/call`. A JSON-RPC error to a tool call comes back as a tool error in the
observation, as upstream's `CallToolObservation.error` does on the plain path.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from openenv.types import StepResult

if TYPE_CHECKING:
    from openenv.client import GenericEnvClient

__all__ = ["McpSessionClient", "NoSessionPath"]

_MAX_REPLY_MB = 16  # a JSON-RPC reply read from POST /mcp, at most
_METHOD_NOT_FOUND = -32601
_ids = itertools.count(1)


class NoSessionPath(Exception):
    """The server has no MCP session path: `POST /mcp` is not served, or `openenv/session/create` is
    an unknown method there (an upstream server older than that method, or an env without MCP)."""


class McpSessionClient:
    """One MCP session of a server, driven like upstream 0.10.0's `MCPToolClient` (module docstring).

    The session is made by `open()` or by the first `reset`, and made again by a `reset` after
    `close()` (so `reset_when_free` can retry it while the server answers CAPACITY_REACHED).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float | None = 60.0,
        max_message_size_mb: float = 100.0,
    ) -> None:
        self.base_url = base_url
        self.message_timeout_s = message_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._max_message_size_mb = max_message_size_mb
        self._headers = dict(headers or {})
        self._session_id: str | None = None
        self._ws: GenericEnvClient | None = None  # attached to the session
        self._tools: list[Any] | None = None

    @classmethod
    def like(cls, client: Any) -> McpSessionClient:
        """A client for the server of `client` (an `EnvClient`), with its headers and time limits."""
        return cls(
            client.base_url,
            headers=dict(getattr(client, "_headers", {}) or {}),
            connect_timeout_s=client.connect_timeout_s,
            message_timeout_s=client.message_timeout_s,
            max_message_size_mb=client.max_message_bytes / (1 << 20),
        )

    async def open(self) -> str:
        """Make the session (`openenv/session/create`); returns its id.

        Raises:
            NoSessionPath: the server does not serve the MCP session path.
            CapacityReachedError: the server holds as many sessions as it takes.
            EnvClientError: the server could not be reached, did not answer in time, or refused.
        """
        if self._session_id is None:
            reply = await self._rpc("openenv/session/create", {}, creating=True)
            session_id = reply.get("session_id") if isinstance(reply, dict) else None
            if not isinstance(session_id, str) or not session_id:
                raise self._error(
                    f"openenv/session/create answered without a session_id: {_short(reply)}", "NO_SESSION"
                )
            self._session_id = session_id
        return self._session_id

    async def connect(self) -> None:
        """Make the session and attach its WebSocket now (as `EnvClient.connect`)."""
        ws = await self._attached()
        await ws.connect()

    async def reset(self, **options: Any) -> StepResult[Any]:
        """Reset the session's env over the WebSocket attached to it (made first when needed)."""
        ws = await self._attached()
        return await ws.reset(**options)

    async def state(self) -> Any:
        ws = await self._attached()
        return await ws.state()

    async def list_tools(self, use_cache: bool = True) -> list[Any]:
        """The session's tools (`tools/list` over POST /mcp).

        Raises:
            EnvServerError: the server answered the listing with a JSON-RPC error.
        """
        from openenv.mcp.types import Tool

        if use_cache and self._tools is not None:
            return list(self._tools)
        reply = await self._rpc("tools/list", {"session_id": await self.open()})
        raw = reply.get("tools") if isinstance(reply, dict) else None
        if not isinstance(raw, list):
            raise self._error(f"tools/list answered without a tools list: {_short(reply)}", "UNEXPECTED_REPLY")
        self._tools = Tool.listed(raw)
        return list(self._tools)

    async def step(self, action: dict[str, Any]) -> StepResult[dict[str, Any]]:
        """Call the tool `action` names (`tool_name`, `arguments`) with `tools/call` over POST /mcp.

        The observation has upstream's `CallToolObservation` fields: `tool_name`, `result` (the
        JSON-RPC result) and `error` (`{"error_type", "message"}` when the call failed)."""
        from openenv.errors import EnvServerError
        from openenv.mcp.jsonrpc import tool_error_type

        name = action.get("tool_name") if isinstance(action, dict) else None
        arguments = action.get("arguments") if isinstance(action, dict) else None
        params = {"name": name, "arguments": arguments or {}, "session_id": await self.open()}
        error: dict[str, Any] | None = None
        result: Any = None
        try:
            result = await self._rpc("tools/call", params)
        except EnvServerError as exc:
            rpc = exc.data.get("error") if isinstance(exc.data.get("error"), dict) else None
            if rpc is None:
                raise
            error = {"error_type": tool_error_type(rpc).value, "message": str(rpc.get("message", ""))[:500]}
        if isinstance(result, dict) and (result.get("isError") or result.get("is_error")):
            error = {"error_type": "execution_error", "message": _short(result.get("content"))}
        return StepResult(observation={"tool_name": name, "result": result, "error": error})

    async def close(self) -> None:
        """Detach the WebSocket, then close the session (`openenv/session/close`), as upstream's
        client does; a server that cannot be told is left to reap it."""
        from openenv.errors import EnvClientError

        ws, self._ws = self._ws, None
        session_id, self._session_id = self._session_id, None
        self._tools = None
        if ws is not None:
            await ws.close()
        if session_id is not None:
            # Best effort, as upstream's client: a session the server lost or reaped is closed already.
            with contextlib.suppress(EnvClientError):
                await self._rpc("openenv/session/close", {"session_id": session_id})

    # -- the two transports --------------------------------------------------------------------------

    async def _attached(self) -> GenericEnvClient:
        from openenv.client import GenericEnvClient
        from openenv.client._transport import ws_url_for

        if self._ws is None:
            session_id = await self.open()
            ws = GenericEnvClient(
                self.base_url,
                headers=self._headers,
                connect_timeout_s=self.connect_timeout_s,
                message_timeout_s=self.message_timeout_s,
                max_message_size_mb=self._max_message_size_mb,
            )
            parts = urlsplit(ws_url_for(self.base_url))
            query = "&".join(q for q in (parts.query, urlencode({"session_id": session_id})) if q)
            ws.ws_url = urlunsplit(parts._replace(query=query))
            self._ws = ws
        return self._ws

    def _mcp_url(self) -> str:
        parts = urlsplit(self.base_url)
        scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
        path = parts.path.rstrip("/")
        path = path[: -len("/ws")] if path.endswith("/ws") else path
        return urlunsplit((scheme, parts.netloc, path + "/mcp", "", ""))

    async def _rpc(self, method: str, params: dict[str, Any], *, creating: bool = False) -> Any:
        """POST one JSON-RPC request to /mcp; returns its `result`.

        Raises:
            NoSessionPath: (`creating` only) /mcp or the method is not served.
            CapacityReachedError, EnvFactoryError: the session could not be made (`creating`).
            EnvServerError: any other JSON-RPC error (`data["error"]` holds it) or HTTP status.
            EnvConnectionError, EnvDisconnectedError, EnvTimeoutError: the request did not get through.
        """
        from openenv.errors import CapacityReachedError, EnvFactoryError

        url = self._mcp_url()
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": next(_ids)}
        status, reply = await asyncio.to_thread(_post, url, body, self._headers, self.message_timeout_s, self.base_url)
        if status != 200 or not isinstance(reply, dict):
            if creating and status in (404, 405):
                raise NoSessionPath(f"POST /mcp answered HTTP {status}")
            raise self._error(f"POST /mcp {method} answered HTTP {status}: {_short(reply)}", f"HTTP_{status}")
        error = reply.get("error")
        if not isinstance(error, dict):
            return reply.get("result")
        raw = error.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        said = f"{method} failed: {error.get('message', 'no message')}"
        if creating and error.get("code") == _METHOD_NOT_FOUND:
            raise NoSessionPath(said)
        if creating and "max_sessions" in data:
            raise CapacityReachedError(said, code="CAPACITY_REACHED", data=data, url=self.base_url)
        if creating and "factory_name" in data:
            raise EnvFactoryError(said, code="FACTORY_ERROR", data=data, url=self.base_url)
        raise self._error(said, f"JSONRPC_{error.get('code')}", {"error": error})

    def _error(self, message: str, code: str, data: dict[str, Any] | None = None) -> Exception:
        from openenv.errors import EnvServerError

        return EnvServerError(message, code=code, data=data, url=self.base_url)


def _post(url: str, body: Any, headers: dict[str, str], timeout_s: float | None, base: str) -> tuple[int, Any]:
    """POST `body` as JSON; returns (status, parsed JSON or None), reading at most _MAX_REPLY_MB."""
    from openenv.errors import EnvConnectionError, EnvDisconnectedError, EnvTimeoutError

    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Accept": "application/json", "Content-Type": "application/json", **headers},
        method="POST",
    )
    limit = _MAX_REPLY_MB << 20
    try:
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                status, raw = reply.status, reply.read(limit + 1)
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read(limit + 1)
    except TimeoutError as exc:
        raise EnvTimeoutError(f"no reply from POST {url} within {timeout_s}s", url=base) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise EnvTimeoutError(f"no reply from POST {url} within {timeout_s}s", url=base) from exc
        raise EnvConnectionError(f"cannot reach POST {url}: {exc.reason}", url=base) from exc
    except (ConnectionError, OSError) as exc:  # the server closed the connection mid-request
        raise EnvDisconnectedError(f"POST {url} ended without a reply: {exc}", url=base) from exc
    if len(raw) > limit:
        return status, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def _short(value: Any, n: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= n else text[: n - 3] + "..."
