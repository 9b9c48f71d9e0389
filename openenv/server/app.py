"""`create_app`: serve an `Environment` over HTTP and WebSocket, upstream-compatible."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import typing
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    field_validator,
)
from starlette.routing import WebSocketRoute

from openenv.env import AnyEnvironment, Environment
from openenv.errors import ConfigurationError
from openenv.mcp.tools import tools_of
from openenv.protocol import PROTOCOL_VERSION, ErrorCode, dumps
from openenv.server.mcp import TOOL_ACTION_TYPES, parse_tool_action, too_large
from openenv.server.runtime import EnvRuntime, RequestError
from openenv.server.settings import ServerSettings, get_settings
from openenv.server.tasks import add_task_routes
from openenv.server.ws import McpWebSocketEndpoint, WebSocketEndpoint
from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = ["create_app"]

API_VERSION = "1.0.0"
_HEALTH_WAIT_S = 30.0

_STATUS_BY_CODE = {
    ErrorCode.VALIDATION_ERROR: 422,
    ErrorCode.EXECUTION_ERROR: 500,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.FACTORY_ERROR: 503,
}


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [{"seed": 42}, {}]})

    seed: int | None = Field(default=None, ge=0, description="Seed for a reproducible episode.")
    episode_id: str | None = Field(default=None, max_length=255, description="Identifier for the new episode.")


class ObservationReply(BaseModel):
    observation: dict[str, Any] = Field(description="The observation's fields, except reward and done.")
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = Field(
        default=None, description="The observation's metadata again, when it has any (as upstream 0.10.0 sends it)."
    )


class HealthReply(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: str = Field(description='"healthy", "starting" or "unhealthy".')
    active_sessions: int
    max_sessions: int


class EnvApp(FastAPI):
    """The FastAPI app of an env server.

    WebSocket frames to `/ws` are the hot path, so while no user middleware is installed their
    connections go straight to the endpoint instead of through Starlette's middleware stack
    (which wraps `send` once per frame). Everything else is plain FastAPI.
    """

    openenv_ws: Any = None

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and self.openenv_ws is not None and not self.user_middleware:
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            if path == "/ws":
                await self.openenv_ws(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    env_factory: Callable[[], AnyEnvironment] | type[AnyEnvironment],
    action_cls: type[Action],
    observation_cls: type[Observation],
    state_cls: type[State] | None = None,
    *,
    env_name: str | None = None,
    max_concurrent_envs: int | None = None,
    settings: ServerSettings | None = None,
    enable_web_interface: bool | None = None,
    reset_observation_cls: type[Observation] | None = None,
    mode: str | None = None,
) -> FastAPI:
    """Build the FastAPI app that serves an environment.

    Args:
        env_factory: the Environment subclass, or a zero-argument callable returning an instance;
            called once per session.
        action_cls: the action model; frames are validated against it.
        observation_cls: the observation model (shown in /schema).
        state_cls: the state model shown in /schema; inferred from `Environment[A, O, S]` when
            omitted.
        env_name: the name shown in /metadata and the OpenAPI title (default: the class name).
        max_concurrent_envs: session capacity; overrides `settings.max_sessions`.
        settings: server settings; `ServerSettings.from_env()` when omitted.
        enable_web_interface: serve the play page at /web (one session per browser tab over
            /ws); default `settings.enable_web_interface` (OPENENV_ENABLE_WEB_INTERFACE).
        reset_observation_cls: the model of what `reset` returns, when it differs from a step's
            (shown in /schema as `reset_observation`; default: `observation_cls`).
        mode: "simulation" (default) or "production", which leaves out the stateless HTTP
            /reset, /step and /state; default `settings.mode` (OPENENV_MODE).

    Returns:
        A FastAPI app with /health, /metadata, /schema, /reset, /step, /state, /mcp (HTTP and
        WebSocket), /ws and the Task API routes (and /web when the web interface is on).

    Raises:
        ConfigurationError: the classes are not models of the right kind, a capacity above 1
            is asked of an environment that does not support concurrent sessions, or a `@tool`
            has type hints that cannot be resolved or described as JSON Schema.
    """
    settings = settings or get_settings()
    if mode is not None:
        settings = settings.with_(mode=mode)
    _check_models(action_cls, observation_cls)
    if reset_observation_cls is not None:
        _check_models(action_cls, reset_observation_cls)
    env_cls = _env_class(env_factory)
    if env_cls is not None and not (env_cls._has_async("step") or env_cls.step is not Environment.step):
        raise ConfigurationError(f"{env_cls.__name__} implements neither step() nor step_async()")
    if env_cls is not None:
        _check_tools(env_cls)
    state_cls = state_cls or _infer_state_cls(env_cls) or State
    max_sessions = max_concurrent_envs or settings.capacity
    if env_cls is not None and not env_cls.SUPPORTS_CONCURRENT_SESSIONS:
        if max_concurrent_envs is not None and max_concurrent_envs > 1:
            raise ConfigurationError(
                f"{env_cls.__name__} sets SUPPORTS_CONCURRENT_SESSIONS = False, so it cannot serve "
                f"{max_concurrent_envs} sessions; make its instances independent and set the flag to True"
            )
        max_sessions = 1
    default_name: str = env_cls.__name__ if env_cls else getattr(env_factory, "__name__", "environment")
    name = env_name or default_name

    runtime = EnvRuntime(env_factory, action_cls, observation_cls, state_cls, settings, max_sessions, env_cls)
    cache: dict[str, dict[str, Any]] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warm = asyncio.get_running_loop().create_task(runtime.sessions.warm_up())
        runtime.sessions.start_reaper()
        try:
            yield
        finally:
            warm.cancel()
            await runtime.sessions.shutdown()

    app = EnvApp(
        title=name,
        version=API_VERSION,
        description=f"OpenEnv environment server for {name}.",
        lifespan=lifespan,
    )
    app.state.openenv_runtime = runtime

    @app.exception_handler(RequestError)
    async def _request_error(_: Any, exc: RequestError) -> JSONResponse:
        status = _STATUS_BY_CODE.get(exc.code, 400)
        if exc.code is ErrorCode.VALIDATION_ERROR and "errors" in exc.details:
            return JSONResponse({"detail": exc.details["errors"]}, status_code=status)
        return JSONResponse({"detail": exc.message, "code": exc.code.value}, status_code=status)

    @app.get("/health", response_model=HealthReply, tags=["Health"], summary="Readiness and capacity")
    async def health() -> JSONResponse:
        sessions = runtime.sessions
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sessions.factory_checked.wait(), _HEALTH_WAIT_S)
        body: dict[str, Any] = {"active_sessions": sessions.active, "max_sessions": sessions.max_sessions}
        if not sessions.factory_checked.is_set():
            return JSONResponse({"status": "starting", **body}, status_code=503)
        if sessions.factory_error:
            return JSONResponse({"status": "unhealthy", "error": sessions.factory_error, **body}, status_code=503)
        return JSONResponse({"status": "healthy", **body})

    @app.get("/metadata", tags=["Environment Info"], summary="Name, description, README and protocol")
    async def metadata() -> dict[str, Any]:
        if "metadata" not in cache:
            cache["metadata"] = await _describe(runtime, name)
        protocol: dict[str, Any] = {"version": PROTOCOL_VERSION, "extensions": list(runtime.extensions)}
        if runtime.forks is not None:
            protocol["fork"] = runtime.forks.limits()
        else:
            protocol["fork_unsupported"] = runtime.fork_unsupported
        return {**cache["metadata"], "protocol": protocol}

    @app.get("/schema", tags=["Schema"], summary="JSON Schemas of action, observation and state")
    async def schema() -> dict[str, Any]:
        if "schema" not in cache:
            cache["schema"] = {
                "action": action_cls.model_json_schema(),
                "observation": observation_cls.model_json_schema(),
                "state": state_cls.model_json_schema(),
                "reset_observation": (reset_observation_cls or observation_cls).model_json_schema(),
            }
            if env_cls is not None:  # reset's own arguments, so that a client can check them first
                cache["schema"]["reset_options"] = _reset_options(env_cls)
        return cache["schema"]

    step_request = create_model(
        "StepRequest",
        __config__=ConfigDict(extra="allow"),
        __validators__={"_tool_actions": field_validator("action", mode="wrap")(_or_tool_action)},
        action=(action_cls, Field(description="The action, as in /schema.")),
        timeout_s=(float | None, Field(default=None, gt=0, description="Stop waiting after this many seconds.")),
        request_id=(str | None, Field(default=None, max_length=255)),
    )

    if settings.mode == "simulation":
        _add_stateless_routes(app, runtime, step_request)

    @app.post(
        "/mcp",
        tags=["MCP"],
        summary="JSON-RPC 2.0: tools/list, tools/call, openenv/session/create, openenv/session/close",
        openapi_extra={
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {"type": "object"},
                        "example": {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "tools/call",
                            "params": {"name": "echo_message", "arguments": {"message": "hi"}},
                        },
                    }
                }
            }
        },
    )
    async def mcp(request: Request) -> Response:
        raw = await request.body()
        reply = too_large(raw, settings.max_message_bytes) or await runtime.mcp.rpc_raw(raw)
        return _json(dumps(reply))

    ws_endpoint = WebSocketEndpoint(runtime)
    app.router.routes.append(WebSocketRoute("/ws", ws_endpoint))
    app.router.routes.append(WebSocketRoute("/mcp", McpWebSocketEndpoint(runtime)))
    app.openenv_ws = ws_endpoint
    add_task_routes(app, runtime, name)
    if settings.enable_web_interface if enable_web_interface is None else enable_web_interface:
        from openenv.server.web import add_web_routes  # imported only when on: no cost otherwise

        add_web_routes(app, name)
    return app


def _add_stateless_routes(app: FastAPI, runtime: EnvRuntime, step_request: Any) -> None:
    """HTTP /reset, /step, /state and /render, each on a fresh environment (simulation mode only)."""

    @app.post(
        "/reset",
        response_model=ObservationReply,
        tags=["Environment Control"],
        summary="Reset a fresh environment (stateless)",
    )
    async def reset(request: ResetRequest = Body(default_factory=ResetRequest)) -> Response:
        async with runtime.fresh_env() as env:
            return _json(await runtime.reset(env, request.model_dump(exclude_unset=True)))

    async def step(request: Any) -> Response:
        async with runtime.fresh_env() as env:
            if request.action.__class__ in TOOL_ACTION_TYPES:
                return _json(await runtime.mcp.step(env, request.action, request.timeout_s))
            return _json(await runtime.step(env, request.action, request.timeout_s))

    # The body model is built at run time, so the annotation is set by hand (this module's
    # annotations are strings that FastAPI could not resolve).
    step.__annotations__["request"] = step_request
    app.post(
        "/step",
        response_model=ObservationReply,
        tags=["Environment Control"],
        summary="Step a fresh environment (stateless)",
    )(step)

    @app.get("/state", tags=["State Management"], summary="State of a fresh environment (stateless)")
    async def state() -> Response:
        async with runtime.fresh_env() as env:
            return _json(await runtime.state(env))

    @app.post("/render", tags=["Environment Control"], summary="Picture of a fresh environment after reset (stateless)")
    async def render(request: ResetRequest = Body(default_factory=ResetRequest)) -> Response:
        # The "render" extension over HTTP: the frame (Frame.to_wire()) or null.
        async with runtime.fresh_env() as env:
            await runtime.reset(env, request.model_dump(exclude_unset=True))
            return _json(await runtime.render(env))


def _check_tools(env_cls: type[AnyEnvironment]) -> None:
    # Build every tool's schema now, so a broken declaration fails at start-up, not mid-episode.
    for spec in tools_of(env_cls).values():
        spec.input_schema()


def _or_tool_action(cls: type, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # /step's body validates the env's action class first; MCP tool actions are the fallback,
    # as on the WebSocket, so /schema and /docs keep showing the env's own action.
    try:
        return handler(value)
    except ValidationError:
        tool_action = parse_tool_action(value)
        if tool_action is None:
            raise
        return tool_action


def _json(payload: bytes) -> Response:
    return Response(payload, media_type="application/json")


async def _describe(runtime: EnvRuntime, name: str) -> dict[str, Any]:
    try:
        async with runtime.fresh_env() as env:
            meta = env.get_metadata()
            if type(env).get_metadata is Environment.get_metadata:
                meta = meta.model_copy(update={"name": name})
    except RequestError:
        meta = EnvironmentMetadata(name=name)
    if isinstance(meta, BaseModel):
        return meta.model_dump()
    return dict(meta)


def _check_models(action_cls: Any, observation_cls: Any) -> None:
    if not (isinstance(action_cls, type) and issubclass(action_cls, BaseModel)):
        raise ConfigurationError(
            f"action_cls must be a pydantic model class (subclass openenv.Action), got {action_cls!r}"
        )
    if not (isinstance(observation_cls, type) and issubclass(observation_cls, Observation)):
        raise ConfigurationError(f"observation_cls must subclass openenv.Observation, got {observation_cls!r}")


def _reset_options(env_cls: type[AnyEnvironment]) -> dict[str, Any]:
    """A JSON Schema of the env's reset arguments besides seed and episode_id: one property per
    named parameter (its type and default where they can be told), `additionalProperties` when
    reset also takes **kwargs."""
    from pydantic import TypeAdapter

    fn = getattr(env_cls, "reset_async" if env_cls._has_async("reset") else "reset")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: the names and defaults still say enough
        hints = {}
    properties: dict[str, Any] = {}
    extra = False
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind is param.VAR_KEYWORD:
            extra = True
        if name in ("self", "seed", "episode_id") or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        prop: dict[str, Any] = {}
        if name in hints:
            with contextlib.suppress(Exception):  # a type pydantic cannot describe: no type shown
                prop = TypeAdapter(hints[name]).json_schema()
        if param.default is not param.empty and isinstance(param.default, (str, int, float, bool, type(None))):
            prop["default"] = param.default
        properties[name] = prop
    return {"type": "object", "properties": properties, "additionalProperties": extra}


def _env_class(factory: Any) -> type[AnyEnvironment] | None:
    if isinstance(factory, type):
        if not issubclass(factory, Environment):
            raise ConfigurationError(f"{factory.__name__} is not a subclass of openenv.Environment")
        return factory
    try:
        ret = typing.get_type_hints(factory).get("return")
    except Exception:  # lambdas, partials, unresolvable annotations: nothing to learn
        return None
    return ret if isinstance(ret, type) and issubclass(ret, Environment) and ret is not Environment else None


def _infer_state_cls(env_cls: type[AnyEnvironment] | None) -> type[State] | None:
    if env_cls is None:
        return None
    for klass in env_cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Environment:
                args = typing.get_args(base)
                if len(args) == 3 and isinstance(args[2], type) and issubclass(args[2], State):
                    return args[2]
    prop = inspect.getattr_static(env_cls, "state", None)
    try:
        hint = typing.get_type_hints(prop.fget).get("return") if isinstance(prop, property) else None
    except Exception:
        return None
    return hint if isinstance(hint, type) and issubclass(hint, State) else None
