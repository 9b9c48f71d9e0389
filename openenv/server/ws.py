"""The `/ws` endpoint: one connection, one session, one environment instance; and WebSocket `/mcp`.

Written against raw ASGI messages rather than Starlette's `WebSocket` wrapper: this loop runs
once per step of every session, so it keeps to a dict lookup, one JSON decode, one validation,
the environment call and one JSON encode.

`/ws?session_id=<id>` drives a session made over HTTP (`openenv/session/create` on POST /mcp,
as upstream 0.10.0's MCPToolClient does) instead of a new one: its frames and the session's HTTP
tool calls take turns, and the session outlives the socket. WebSocket `/mcp` carries bare
JSON-RPC requests and replies, one session per connection.
"""

from __future__ import annotations

import asyncio
import logging
from time import monotonic
from typing import Any
from urllib.parse import parse_qs

from openenv.mcp.jsonrpc import RpcCode, rpc_error
from openenv.protocol import (
    FORK_FRAME,
    MCP_FRAME,
    OBSERVATION_FRAME,
    PROTOCOL_HEADER,
    PROTOCOL_VERSION,
    RELEASE_FRAME,
    RENDER_FRAME,
    SNAPSHOT_FRAME,
    STATE_FRAME,
    ErrorCode,
    JSONDecodeError,
    dumps,
    error_frame,
    loads,
)
from openenv.server.mcp import AttachError, too_large
from openenv.server.runtime import EnvRuntime, RequestError, ToolActionRequest
from openenv.server.sessions import CapacityError, FactoryError, Session

__all__ = ["McpWebSocketEndpoint", "WebSocketEndpoint"]

log = logging.getLogger("openenv.server")


def _handshake_headers(extensions: tuple[str, ...]) -> list[tuple[bytes, bytes]]:
    return [(PROTOCOL_HEADER.encode(), f"{PROTOCOL_VERSION}; ext={','.join(extensions)}".encode())]


_STEP_KEYS = frozenset({"type", "data", "timeout_s"})
# Frames of the "fork" extension (with upstream's names get_state / set_state for snapshot / restore).
_FORK_TYPES = frozenset({"snapshot", "restore", "release", "fork", "get_state", "set_state"})
_CLOSE_NORMAL = 1000
_CLOSE_GOING_AWAY = 1001
_CLOSE_POLICY = 1008
_CLOSE_INTERNAL = 1011
_CLOSE_TRY_AGAIN = 1013


class _Closed(Exception):
    """The peer is gone; stop quietly."""


class _Endpoint:
    """What both WebSocket endpoints share: the runtime, the frame size limit, the handshake."""

    def __init__(self, runtime: EnvRuntime) -> None:
        self.runtime = runtime
        self.max_bytes = runtime.settings.max_message_bytes

    @staticmethod
    async def _accept(receive: Any, send: Any, headers: list[tuple[bytes, bytes]]) -> bool:
        """Accept the connection; False when the peer left before it was made."""
        message = await receive()
        if message["type"] != "websocket.connect":
            return False
        await send({"type": "websocket.accept", "headers": headers})
        return True


class WebSocketEndpoint(_Endpoint):
    """ASGI app for the `/ws` route."""

    def __init__(self, runtime: EnvRuntime) -> None:
        super().__init__(runtime)
        self._headers = _handshake_headers(runtime.extensions)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not await self._accept(receive, send, self._headers):
            return
        runtime = self.runtime
        if scope.get("query_string"):
            session_id = parse_qs(scope["query_string"].decode("latin-1")).get("session_id")
            if session_id:
                await self._attached(session_id[0], receive, send)
                return

        session = await _open_session(runtime, send, _protocol_refusal)
        if session is None:
            return
        try:
            await self._serve_guarded(session, receive, send, None)
        finally:
            await runtime.sessions.close(session)

    async def _attached(self, session_id: str, receive: Any, send: Any) -> None:
        """Drive the HTTP session `session_id` until the socket closes; the session lives on."""
        mcp = self.runtime.mcp
        try:
            session, lock = mcp.attach(session_id)
        except AttachError as exc:
            await _send_quietly(send, error_frame(ErrorCode.SESSION_ERROR, str(exc)))
            await _close_quietly(send, _CLOSE_POLICY, "unknown or busy session")
            return
        try:
            await self._serve_guarded(session, receive, send, lock)
        finally:
            await mcp.detach(session)

    async def _serve_guarded(self, session: Session, receive: Any, send: Any, lock: asyncio.Lock | None) -> None:
        """`_serve`, with a peer that left ending it quietly and a bug of ours told to the peer
        (the server keeps serving)."""
        try:
            await self._serve(session, receive, send, lock)
        except _Closed:
            pass
        except Exception as exc:
            log.exception("websocket on session %s failed", session.id)
            await _send_quietly(send, error_frame(ErrorCode.SESSION_ERROR, f"{type(exc).__name__}: {exc}"))
            await _close_quietly(send, _CLOSE_INTERNAL, "internal error")

    async def _serve(self, session: Session, receive: Any, send: Any, lock: asyncio.Lock | None = None) -> None:
        handle = self._handle
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                if session.closed:  # expired while the frame was in flight
                    return
                session.busy = True
                try:
                    if lock is None:
                        reply = await handle(session, raw)
                    else:  # the session's HTTP tool calls may come in between: one call at a time
                        async with lock:
                            reply = await handle(session, raw)
                finally:
                    session.busy = False
                    session.last_active = monotonic()
                if reply is None:
                    await _close_quietly(send, _CLOSE_NORMAL, "")
                    return
                try:
                    await send({"type": "websocket.send", "text": reply.decode()})
                except OSError:
                    raise _Closed from None
            elif kind == "websocket.disconnect":
                return

    async def _handle(self, session: Session, raw: str | bytes) -> bytes | None:
        if len(raw) > self.max_bytes:
            return error_frame(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"frame of {len(raw)} bytes is over the limit of {self.max_bytes}; send less per message",
                limit=self.max_bytes,
            )
        try:
            msg = loads(raw)
        except JSONDecodeError as exc:
            return error_frame(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}")
        if type(msg) is not dict:
            return error_frame(
                ErrorCode.VALIDATION_ERROR,
                f'a frame must be a JSON object like {{"type": "step", "data": {{...}}}}, got {type(msg).__name__}',
                errors=[{"type": "dict_type", "loc": [], "msg": "Input should be a valid dictionary"}],
            )
        kind = msg.get("type")
        runtime = self.runtime
        env = session.env
        try:
            if kind == "step":
                if len(msg) > 2 and msg.keys() - _STEP_KEYS:
                    raise RequestError(
                        ErrorCode.VALIDATION_ERROR, f"unknown keys in step frame: {sorted(msg.keys() - _STEP_KEYS)}"
                    )
                timeout_s = msg.get("timeout_s")
                if timeout_s is not None and (not isinstance(timeout_s, (int, float)) or timeout_s <= 0):
                    raise RequestError(ErrorCode.VALIDATION_ERROR, "timeout_s must be a positive number of seconds")
                action = runtime.parse_action(msg.get("data"))
                session.steps += 1
                payload = session.last_observation = await runtime.step(env, action, timeout_s)
                return OBSERVATION_FRAME % payload
            if kind == "reset":
                payload = session.last_observation = await runtime.reset(env, msg.get("data"))
                return OBSERVATION_FRAME % payload
            if kind == "state":
                return STATE_FRAME % await runtime.state(env)
            if kind == "render":  # the "render" extension: a picture of the session's env
                return RENDER_FRAME % await runtime.render(env)
            if kind == "close":
                return None
            if kind in _FORK_TYPES:  # the "fork" extension
                return await self._fork_request(session, kind, msg.get("data"))
            if kind == "mcp":
                data = msg.get("data")
                if type(data) is not dict:
                    raise RequestError(
                        ErrorCode.VALIDATION_ERROR,
                        'an mcp frame carries a JSON-RPC request: {"type": "mcp", "data": {"jsonrpc": "2.0", "method": ..., "id": ...}}',
                        errors=[{"type": "dict_type", "loc": ["data"], "msg": "Input should be a valid dictionary"}],
                    )
                return MCP_FRAME % dumps(await runtime.mcp.rpc(data, session))
            return error_frame(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}")
        except RequestError as exc:
            return error_frame(exc.code, exc.message, **exc.details)
        except ToolActionRequest as request:  # a step frame carrying ListToolsAction / CallToolAction
            session.steps += 1
            try:
                payload = session.last_observation = await runtime.mcp.step(env, request.action, msg.get("timeout_s"))
                return OBSERVATION_FRAME % payload
            except RequestError as exc:
                return error_frame(exc.code, exc.message, **exc.details)

    async def _fork_request(self, session: Session, kind: str, data: Any) -> bytes:
        forks = self.runtime.forks
        if forks is None:
            raise RequestError(
                ErrorCode.FORK_UNSUPPORTED,
                f"this server does not offer the fork extension: {self.runtime.fork_unsupported}",
            )
        if kind in ("snapshot", "get_state"):
            return SNAPSHOT_FRAME % await forks.snapshot(session)
        if kind in ("restore", "set_state"):
            return OBSERVATION_FRAME % await forks.restore(session, data)
        if kind == "release":
            return RELEASE_FRAME % await forks.release(session, data)
        return FORK_FRAME % await forks.fork(session, data)


class McpWebSocketEndpoint(_Endpoint):
    """ASGI app for WebSocket `/mcp`: each text frame a JSON-RPC request, each reply one frame,
    all on one session (an environment instance) of its own for the connection's life."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not await self._accept(receive, send, []):
            return
        runtime = self.runtime

        session = await _open_session(runtime, send, _rpc_refusal)
        if session is None:
            return
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message["type"] != "websocket.receive":
                    continue
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                reply = too_large(raw, self.max_bytes)
                if reply is None:
                    session.busy = True
                    try:
                        reply = await runtime.mcp.rpc_raw(raw, session)
                    finally:
                        session.busy = False
                        session.last_active = monotonic()
                try:
                    await send({"type": "websocket.send", "text": dumps(reply).decode()})
                except OSError:
                    return
        finally:
            await runtime.sessions.close(session)


async def _open_session(runtime: EnvRuntime, send: Any, refusal: Any) -> Session | None:
    """A session for this connection (closed 1001 when reaped for idleness); None when there is
    none to be had, after telling the peer why (`refusal(exc)` makes the frame) and closing."""

    async def expire(reason: str) -> None:
        await send({"type": "websocket.close", "code": _CLOSE_GOING_AWAY, "reason": reason[:120]})

    try:
        return await runtime.open_session(expire)
    except CapacityError as exc:
        await _send_quietly(send, refusal(exc))
        await _close_quietly(send, _CLOSE_TRY_AGAIN, "server at capacity")
    except FactoryError as exc:
        await _send_quietly(send, refusal(exc))
        await _close_quietly(send, _CLOSE_INTERNAL, "environment could not be built")
    return None


def _protocol_refusal(exc: CapacityError | FactoryError) -> bytes:
    if isinstance(exc, CapacityError):
        return error_frame(ErrorCode.CAPACITY_REACHED, str(exc), active_sessions=exc.active, max_sessions=exc.maximum)
    return error_frame(ErrorCode.FACTORY_ERROR, str(exc), factory_name=exc.factory_name)


def _rpc_refusal(exc: CapacityError | FactoryError) -> bytes:
    if isinstance(exc, CapacityError):
        return dumps(
            rpc_error(
                None, RpcCode.SERVER_ERROR, str(exc), {"active_sessions": exc.active, "max_sessions": exc.maximum}
            )
        )
    return dumps(rpc_error(None, RpcCode.SERVER_ERROR, str(exc), {"factory_name": exc.factory_name}))


async def _send_quietly(send: Any, frame: bytes) -> None:
    try:
        await send({"type": "websocket.send", "text": frame.decode()})
    except Exception:  # the peer left first; nothing to tell
        log.debug("peer gone before an error frame could be sent", exc_info=True)


async def _close_quietly(send: Any, code: int, reason: str) -> None:
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except Exception:
        log.debug("peer gone before the close frame", exc_info=True)
