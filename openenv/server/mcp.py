"""The server's MCP side: tool calls for the step actions and JSON-RPC for `/mcp` and WS `mcp`.

One `McpService` per app (held by the runtime as `runtime.mcp`). Every transport ends in
`call_tool`, which looks the tool up on the environment's class, validates the arguments,
runs the method (sync tools in the shared worker pool, so a slow tool never holds the event
loop) under the tool's time limit, and turns any failure into a `ToolFailure` with one of
upstream's error types.

JSON-RPC methods: `tools/list`, `tools/call`, and upstream's `openenv/session/create` /
`openenv/session/close`, which give HTTP callers a session (an env instance) that lives across
requests; its id goes in `params.session_id`. Without one, an HTTP request gets a fresh
environment that is closed after the reply (as upstream's stateless HTTP routes do). A WebSocket
may attach to such a session (`/ws?session_id=`, what upstream 0.10.0's MCPToolClient does): one
socket at a time, the session outlives the socket, and a close asked over HTTP while a socket is
attached happens when it detaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator
from time import monotonic
from typing import Any

from pydantic_core import to_jsonable_python

from openenv.env import AnyEnvironment, Environment
from openenv.errors import ConfigurationError, EnvStepTimeout
from openenv.mcp.jsonrpc import RpcCode, rpc_error, rpc_result, tool_error_code
from openenv.mcp.tools import ToolArgumentsError, ToolSpec, tools_of
from openenv.mcp.types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.protocol import ErrorCode, JSONDecodeError, dumps, loads, observation_json
from openenv.server._errors import RequestError
from openenv.server._runtime_view import RuntimeView
from openenv.server.sessions import CapacityError, FactoryError, Session
from openenv.types import Action

__all__ = [
    "TOOL_ACTIONS",
    "TOOL_ACTION_TYPES",
    "AttachError",
    "McpService",
    "ToolFailure",
    "parse_tool_action",
    "too_large",
]

log = logging.getLogger("openenv.server")

TOOL_ACTIONS: dict[str, type[Action]] = {"list_tools": ListToolsAction, "call_tool": CallToolAction}
TOOL_ACTION_TYPES = frozenset(TOOL_ACTIONS.values())
_METHODS = ("tools/list", "tools/call", "openenv/session/create", "openenv/session/close")


class AttachError(Exception):
    """A WebSocket cannot attach to the HTTP session it named; the message says why."""


class ToolFailure(Exception):
    """A tool call failed; `error` is what the caller is told."""

    def __init__(self, error_type: ToolErrorType, message: str) -> None:
        super().__init__(message)
        self.error = ToolError(error_type=error_type, message=message)


def parse_tool_action(data: Any) -> Action | None:
    """`data` as a ListToolsAction / CallToolAction when its `type` names one, else None.

    Raises:
        ValidationError: `type` names a tool action but the other fields do not fit it.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    cls = TOOL_ACTIONS.get(kind) if isinstance(kind, str) else None
    return None if cls is None else cls.model_validate(data)


class McpService:
    """Tool calls and JSON-RPC dispatch for one app."""

    def __init__(self, runtime: RuntimeView, default_timeout_s: float) -> None:
        self.runtime = runtime
        self.default_timeout_s = default_timeout_s
        self._env_cls: type | None = runtime.env_factory if isinstance(runtime.env_factory, type) else None
        self._tool_lists: dict[type, list[Tool]] = {}
        # Sessions opened by openenv/session/create, with a lock each: HTTP requests may arrive
        # concurrently, and an environment expects one call at a time.
        self._http_sessions: dict[str, asyncio.Lock] = {}
        self._closing: set[str] = set()  # attached sessions whose close was asked over HTTP

    # -- tools ----------------------------------------------------------------------------------

    def list_tools(self, env_cls: type) -> list[Tool]:
        """The `Tool` entries of an environment class (cached)."""
        tools = self._tool_lists.get(env_cls)
        if tools is None:
            tools = self._tool_lists[env_cls] = [spec.describe() for spec in tools_of(env_cls).values()]
        return tools

    async def call_tool(self, env: AnyEnvironment, name: Any, arguments: Any, timeout_s: float | None = None) -> Any:
        """Run tool `name` on `env`; returns its result as JSON-ready data.

        Raises:
            ToolFailure: unknown tool, bad arguments, the tool raised, or it ran out of time.
        """
        specs = tools_of(type(env))
        spec = specs.get(name) if isinstance(name, str) else None
        if spec is None:
            known = ", ".join(sorted(specs)) or "none: this environment exposes no tools"
            raise ToolFailure(ToolErrorType.TOOL_NOT_FOUND, f"Unknown tool: {name!r}; available tools: {known}")
        try:
            kwargs = spec.validate({} if arguments is None else arguments)
        except ToolArgumentsError as exc:
            raise ToolFailure(ToolErrorType.INVALID_ARGS, str(exc)) from None
        except ConfigurationError as exc:  # the tool's declaration is broken: the author must fix it
            log.error("%s", exc)
            raise ToolFailure(ToolErrorType.EXECUTION_ERROR, str(exc)) from None
        limit = spec.timeout_s or self.default_timeout_s
        if timeout_s is not None:
            limit = min(limit, timeout_s)
        value = await self._run(env, spec, kwargs, limit)
        try:
            return to_jsonable_python(value, fallback=_array_fallback)
        except Exception as exc:  # TypeError from the fallback, or pydantic_core's own errors
            raise ToolFailure(
                ToolErrorType.EXECUTION_ERROR,
                f"tool {spec.name!r} returned a {type(value).__name__} that cannot be sent as JSON: {exc}",
            ) from None

    async def _run(self, env: AnyEnvironment, spec: ToolSpec, kwargs: dict[str, Any], limit: float) -> Any:
        method = getattr(env, spec.attr)
        try:
            if spec.is_async:
                return await _within(method(**kwargs), limit)
            executor = self.runtime.executor
            policy = executor.policy(type(env), f"tool:{spec.name}")
            return await executor.in_pool(policy, method, (), kwargs, limit, grace_s=0.0)
        except EnvStepTimeout:  # our limit; a TimeoutError the tool raises itself is its own failure
            raise ToolFailure(ToolErrorType.TIMEOUT, f"Tool {spec.name!r} timed out after {limit:g} seconds") from None
        except Exception as exc:
            log.info("tool %s of %s raised %s: %s", spec.name, type(env).__name__, type(exc).__name__, exc)
            raise ToolFailure(ToolErrorType.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}") from None

    # -- the step actions -------------------------------------------------------------------------

    async def step(self, env: AnyEnvironment, action: Action, timeout_s: float | None) -> bytes:
        """Answer a ListToolsAction / CallToolAction sent as a step; returns the payload bytes."""
        if isinstance(action, ListToolsAction):
            try:
                tools = self.list_tools(type(env))
            except ConfigurationError as exc:
                raise RequestError(ErrorCode.EXECUTION_ERROR, str(exc)) from exc
            return observation_json(ListToolsObservation(tools=tools))
        assert isinstance(action, CallToolAction)
        try:
            result = await self.call_tool(env, action.tool_name, action.arguments, timeout_s)
            obs = CallToolObservation(tool_name=action.tool_name, result=result)
        except ToolFailure as exc:
            obs = CallToolObservation(tool_name=action.tool_name, error=exc.error)
        if type(env).after_tool_call is not Environment.after_tool_call:
            obs = await self._after_tool_call(env, action, obs)
        return observation_json(obs)

    async def _after_tool_call(self, env: AnyEnvironment, action: CallToolAction, obs: CallToolObservation) -> Any:
        try:
            out = await self.runtime.executor.run(type(env), "after_tool_call", env.after_tool_call, action, obs)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:
            raise RequestError(
                ErrorCode.EXECUTION_ERROR, f"after_tool_call raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(out, CallToolObservation):
            raise RequestError(
                ErrorCode.EXECUTION_ERROR,
                f"{type(env).__name__}.after_tool_call() returned {type(out).__name__}, expected a CallToolObservation",
            )
        return out

    # -- JSON-RPC ---------------------------------------------------------------------------------

    async def rpc(self, request: Any, session: Session | None = None) -> dict[str, Any]:
        """Answer one JSON-RPC request. `session` is the WebSocket's own session, if any.

        Never raises: every failure, ours included, becomes a JSON-RPC error reply.
        """
        try:
            return await self._rpc(request, session)
        except Exception as exc:  # a bug here or in an env's tool declaration: report, keep serving
            log.exception("JSON-RPC request failed")
            rid = request.get("id") if isinstance(request, dict) else None
            return rpc_error(
                rid if type(rid) in (str, int) else None, RpcCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
            )

    async def rpc_raw(self, raw: str | bytes, session: Session | None = None) -> dict[str, Any]:
        """`rpc` for a request as it arrived (`/mcp`'s body, a WebSocket frame); a parse error
        reply when it is not JSON. Never raises."""
        try:
            request = loads(raw)
        except JSONDecodeError as exc:
            return rpc_error(None, RpcCode.PARSE_ERROR, f"Parse error: {exc}")
        return await self.rpc(request, session)

    async def _rpc(self, request: Any, session: Session | None) -> dict[str, Any]:
        if not isinstance(request, dict):
            return rpc_error(
                None,
                RpcCode.INVALID_REQUEST,
                'a JSON-RPC request is an object: {"jsonrpc": "2.0", "method": ..., "id": ...}',
            )
        rid = request.get("id")
        if rid is not None and (type(rid) not in (str, int)):
            return rpc_error(None, RpcCode.INVALID_REQUEST, "id must be a string, an integer or null")
        if request.get("jsonrpc") != "2.0":
            return rpc_error(rid, RpcCode.INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
        method = request.get("method")
        if not isinstance(method, str):
            return rpc_error(
                rid, RpcCode.INVALID_REQUEST, 'Invalid request: "method" must be a string such as "tools/list"'
            )
        params = request.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return rpc_error(rid, RpcCode.INVALID_PARAMS, "Params must be an object")
        if method == "openenv/session/create":
            return await self._create_session(rid, session)
        if method == "openenv/session/close":
            return await self._close_session(rid, params, session)
        if method not in _METHODS:
            return rpc_error(
                rid, RpcCode.METHOD_NOT_FOUND, f"Method not found: {method}; this server answers {', '.join(_METHODS)}"
            )
        if method == "tools/list" and session is None and "session_id" not in params and self._env_cls is not None:
            return rpc_result(rid, {"tools": self._rpc_tools(self._env_cls)})
        try:
            async with self._env_for(params, session) as env:
                if method == "tools/list":
                    return rpc_result(rid, {"tools": self._rpc_tools(type(env))})
                return await self._rpc_call(rid, env, params)
        except _RpcFailure as exc:
            return rpc_error(rid, exc.code, exc.message, exc.data)

    def _rpc_tools(self, env_cls: type) -> list[dict[str, Any]]:
        # MCP spells the schema `inputSchema`; upstream's clients read either spelling.
        return [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in self.list_tools(env_cls)
        ]

    async def _rpc_call(self, rid: Any, env: AnyEnvironment, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            return rpc_error(rid, RpcCode.INVALID_PARAMS, "Missing 'name' in params: the tool to call")
        try:
            value = await self.call_tool(env, name, params.get("arguments") or {})
        except ToolFailure as exc:
            data = {**exc.error.model_dump(mode="json"), "tool_name": name}
            return rpc_error(rid, tool_error_code(exc.error.error_type), exc.error.message, data)
        text = value if isinstance(value, str) else dumps(value).decode()
        return rpc_result(
            rid,
            {
                "content": [{"type": "text", "text": text}],
                "structuredContent": value if isinstance(value, dict) else {"result": value},
                "isError": False,
                "data": value,  # the plain value: what upstream's client returns from call_tool
            },
        )

    @contextlib.asynccontextmanager
    async def _env_for(self, params: dict[str, Any], session: Session | None) -> AsyncIterator[AnyEnvironment]:
        if session is not None:  # the WebSocket's own session: its loop already serializes calls
            yield session.env
            return
        session_id = params.get("session_id")
        if session_id is None:
            runtime = self.runtime
            try:
                env = await runtime.sessions.build_env()
            except FactoryError as exc:
                raise _RpcFailure(RpcCode.SERVER_ERROR, str(exc), {"factory_name": exc.factory_name}) from None
            try:
                yield env
            finally:
                await runtime.sessions.close_env(env)
            return
        found = self._http_session(session_id)
        if found is None:
            raise _RpcFailure(
                RpcCode.INVALID_PARAMS,
                f"Unknown session_id: {session_id}; it expired or was closed: create one with openenv/session/create",
            )
        sess, lock = found
        async with lock:
            sess.busy = True
            try:
                yield sess.env
            finally:
                sess.busy = False
                sess.last_active = monotonic()

    def _http_session(self, session_id: Any) -> tuple[Session, asyncio.Lock] | None:
        lock = self._http_sessions.get(session_id) if isinstance(session_id, str) else None
        if lock is None:
            return None
        sess = self.runtime.sessions.sessions.get(session_id)
        if sess is None or sess.closed:  # reaped for idleness
            self._http_sessions.pop(session_id, None)
            return None
        return sess, lock

    async def _create_session(self, rid: Any, session: Session | None) -> dict[str, Any]:
        if session is not None:
            return rpc_result(rid, {"session_id": session.id})
        for stale in [sid for sid in self._http_sessions if sid not in self.runtime.sessions.sessions]:
            del self._http_sessions[stale]
        try:
            new = await self.runtime.open_session()
        except CapacityError as exc:
            return rpc_error(
                rid, RpcCode.SERVER_ERROR, str(exc), {"active_sessions": exc.active, "max_sessions": exc.maximum}
            )
        except FactoryError as exc:
            return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), {"factory_name": exc.factory_name})
        self._http_sessions[new.id] = asyncio.Lock()
        return rpc_result(rid, {"session_id": new.id})

    def adopt(self, session: Session) -> None:
        """Make a session made elsewhere (a fork's child) one a WebSocket may attach to with
        `/ws?session_id=`; it closes when that socket lets go."""
        live = self.runtime.sessions.sessions
        if len(self._closing) > len(live) + 64:  # children closed unclaimed (parent gone, idle): forget them
            self._closing = {sid for sid in self._closing if sid in live}
            for stale in [sid for sid in self._http_sessions if sid not in live]:
                del self._http_sessions[stale]
        self._http_sessions[session.id] = asyncio.Lock()
        self._closing.add(session.id)

    def attach(self, session_id: str) -> tuple[Session, asyncio.Lock]:
        """Hand the HTTP session `session_id` to a WebSocket (until `detach`).

        Raises:
            AttachError: no such session (never made, closed or expired), or a socket has it already.
        """
        found = self._http_session(session_id)
        if found is None:
            raise AttachError(
                f"Unknown session_id: {session_id}; it expired or was closed: create one with openenv/session/create over POST /mcp"
            )
        sess, lock = found
        if sess.attached:
            raise AttachError(
                f"session {session_id} is already attached to another WebSocket; one socket drives a session at a time"
            )
        sess.attached = True
        return sess, lock

    async def detach(self, session: Session) -> None:
        """The WebSocket let go of `session`: it lives on (its close, if one was asked meanwhile, happens now)."""
        session.attached = False
        session.last_active = monotonic()
        if session.id in self._closing:
            self._closing.discard(session.id)
            found = self._http_session(session.id)
            if found is not None:
                async with found[1]:
                    self._http_sessions.pop(session.id, None)
                    await self.runtime.sessions.close(session)

    async def _close_session(self, rid: Any, params: dict[str, Any], session: Session | None) -> dict[str, Any]:
        session_id = params.get("session_id")
        if not session_id:
            return rpc_error(rid, RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required")
        if session is not None and session_id == session.id:
            return rpc_error(
                rid, RpcCode.INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method"
            )
        found = self._http_session(session_id)
        if found is None:
            return rpc_error(rid, RpcCode.INVALID_PARAMS, f"Unknown session_id: {session_id}")
        sess, lock = found
        if sess.attached:  # a WebSocket drives it now: closed when the socket lets go
            self._closing.add(sess.id)
            return rpc_result(rid, {"session_id": sess.id, "closed": False, "closing": True})
        async with lock:
            self._http_sessions.pop(sess.id, None)
            await self.runtime.sessions.close(sess)
        return rpc_result(rid, {"session_id": sess.id, "closed": True})


def too_large(raw: str | bytes, limit: int) -> dict[str, Any] | None:
    """The JSON-RPC refusal of a request longer than `limit`, or None when it is within it."""
    if len(raw) <= limit:
        return None
    return rpc_error(None, RpcCode.INVALID_REQUEST, f"request of {len(raw)} bytes is over the limit of {limit}")


async def _within(coro: Any, limit: float) -> Any:
    """Await `coro` for at most `limit` seconds (then cancel it and raise EnvStepTimeout)."""
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait((task,), timeout=limit)
    finally:
        if not task.done():
            task.cancel()
    if not done:
        raise EnvStepTimeout(f"the call did not finish within {limit:g}s")
    return task.result()


def _array_fallback(value: Any) -> Any:
    # numpy arrays and scalars, tensors: anything with tolist() becomes plain lists and numbers.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot encode a {type(value).__name__} as JSON")


class _RpcFailure(Exception):
    def __init__(self, code: RpcCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
