"""`EnvRuntime`: the transport-free core of a server. HTTP and WebSocket handlers call it.

It validates requests against the environment's models, runs the environment's methods through
the executor, and shapes replies for the wire. Errors come out as `RequestError` with a protocol
error code, so every transport reports them the same way.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from time import perf_counter
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from openenv.env import AnyEnvironment, Environment
from openenv.errors import EnvStepTimeout
from openenv.protocol import EXTENSIONS, FORK_EXTENSION, ErrorCode, dumps, observation_json
from openenv.server._errors import RequestError
from openenv.server.execution import Executor, FullCollections
from openenv.server.forks import Forks
from openenv.server.mcp import McpService, parse_tool_action
from openenv.server.sessions import FactoryError, Session, SessionManager
from openenv.server.settings import ServerSettings
from openenv.types import Action, Observation, State

__all__ = ["EnvRuntime", "RequestError", "ToolActionRequest"]


class ToolActionRequest(Exception):
    """`parse_action` found a ListToolsAction / CallToolAction in a step frame.

    Raised rather than returned, so the step hot path never checks for tools and pays nothing
    for them; the transport answers it with `runtime.mcp.step`.
    """

    def __init__(self, action: Action) -> None:
        super().__init__(type(action).__name__)
        self.action = action


def validation_details(exc: ValidationError) -> list[ErrorDetails]:
    """pydantic's error list, trimmed of what does not serialize or help (urls, exceptions)."""
    out = []
    for err in exc.errors(include_url=False):
        ctx = err.get("ctx")
        if ctx:
            err["ctx"] = {
                k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in ctx.items()
            }
        out.append(err)
    return out


class _Call:
    """How to call one method of one env class: async or not, which kwargs, where it runs."""

    __slots__ = ("accepts_any", "is_async", "name", "params", "policy")

    def __init__(self, env_cls: type[AnyEnvironment], name: str, executor: Executor) -> None:
        self.name = name
        self.is_async = env_cls._has_async(name)
        fn = getattr(env_cls, f"{name}_async" if self.is_async else name)
        sig = inspect.signature(fn)
        self.accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        self.params = frozenset(sig.parameters) - {"self"}
        self.policy = executor.policy(env_cls, name)

    def filter(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.accepts_any:
            return kwargs
        return {k: v for k, v in kwargs.items() if k in self.params}


class EnvRuntime:
    """Everything a transport needs to serve one environment class."""

    def __init__(
        self,
        env_factory: Callable[[], AnyEnvironment],
        action_cls: type[Action],
        observation_cls: type[Observation],
        state_cls: type[State],
        settings: ServerSettings,
        max_sessions: int,
        env_cls: type[AnyEnvironment] | None = None,
    ) -> None:
        self.env_factory = env_factory
        self.action_cls = action_cls
        self.observation_cls = observation_cls
        self.state_cls = state_cls
        self.settings = settings
        self.executor = Executor(settings.worker_threads)
        self.sessions = SessionManager(
            env_factory,
            max_sessions=max_sessions,
            idle_timeout_s=settings.session_idle_timeout_s,
            executor=self.executor,
        )
        self._calls: dict[tuple[type, str], _Call] = {}
        self._validate_action = action_cls.model_validate
        self.mcp = McpService(self, settings.tool_timeout_s)
        env_cls = env_cls or _env_class_of(env_factory)
        # The "fork" extension, for envs that can be snapshotted; a factory whose class cannot be
        # told (no return annotation) is not announced, so nobody is promised what may fail.
        self.forkable = env_cls is not None and env_cls.supports_snapshots()
        self.fork_unsupported: str | None = None
        if not self.forkable:
            self.fork_unsupported = (
                f"{env_cls.__name__} cannot be snapshotted: {env_cls.SNAPSHOT_UNSUPPORTED}"
                if env_cls is not None
                else "the env factory does not say which Environment class it builds (annotate its return type)"
            )
        self.extensions: tuple[str, ...] = (*EXTENSIONS, FORK_EXTENSION) if self.forkable else EXTENSIONS
        self.forks = Forks(self) if self.forkable else None

    def _call(self, env: AnyEnvironment, name: str) -> _Call:
        key = (type(env), name)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(type(env), name, self.executor)
        return call

    # -- requests -----------------------------------------------------------------------------

    async def reset(self, env: AnyEnvironment, data: Any) -> bytes:
        """Reset `env` with the options in `data`; returns the payload as JSON bytes."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise RequestError(ErrorCode.VALIDATION_ERROR, 'reset data must be an object, e.g. {"seed": 1}')
        seed = data.get("seed")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise RequestError(ErrorCode.VALIDATION_ERROR, f"seed must be a non-negative integer, got {seed!r}")
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
            raise RequestError(ErrorCode.VALIDATION_ERROR, "episode_id must be a string of at most 255 characters")
        call = self._call(env, "reset")
        obs = await self._invoke(env, call, (), call.filter(data), None)
        return self._payload(env, "reset", obs)

    def parse_action(self, data: Any) -> Action:
        """Validate an action dict against the env's action class.

        Raises:
            RequestError: VALIDATION_ERROR, with pydantic's error list.
            ToolActionRequest: the data is a tool action (and not one of the env's own).
        """
        if not isinstance(data, dict):
            raise RequestError(
                ErrorCode.VALIDATION_ERROR,
                f"the action must be an object of {self.action_cls.__name__}'s fields, got {type(data).__name__}",
                errors=[{"type": "dict_type", "loc": ["data"], "msg": "Input should be a valid dictionary"}],
            )
        try:
            return self._validate_action(data)
        except ValidationError as exc:
            error = exc
        # Only now, off the hot path: the MCP step actions, unless the env's own class took them.
        try:
            tool_action = parse_tool_action(data)
        except ValidationError as exc:
            raise RequestError(
                ErrorCode.VALIDATION_ERROR, f"Invalid {data['type']} action", errors=validation_details(exc)
            ) from None
        if tool_action is not None:
            raise ToolActionRequest(tool_action)
        raise RequestError(
            ErrorCode.VALIDATION_ERROR,
            f"Invalid action for {self.action_cls.__name__}",
            errors=validation_details(error),
        ) from None

    async def step(self, env: AnyEnvironment, action: Action, timeout_s: float | None = None) -> bytes:
        """Apply a validated action of the env's own class; returns the payload as JSON bytes.

        Tool actions (ListToolsAction / CallToolAction) go to `self.mcp.step` instead.
        """
        call = self._calls.get((type(env), "step")) or self._call(env, "step")
        policy = call.policy
        if policy.inline and timeout_s is None and not call.is_async:
            # The hot path: a proven-fast sync step, called right here on the loop.
            collections, start = FullCollections.count, perf_counter()
            try:
                obs = env.step(action)
            except Exception as exc:
                raise RequestError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}") from exc
            finally:
                policy.after_inline(perf_counter() - start, collections)
        else:
            kwargs: dict[str, Any] = {"timeout_s": timeout_s} if timeout_s is not None else {}
            obs = await self._invoke(env, call, (action,), call.filter(kwargs), timeout_s)
        return self._payload(env, "step", obs)

    async def state(self, env: AnyEnvironment) -> bytes:
        """The env's state as JSON bytes."""
        try:
            state = env.state
            if isinstance(state, BaseModel):
                return state.__pydantic_serializer__.to_json(state)
            if isinstance(state, dict):
                return dumps(state)
        except Exception as exc:
            raise RequestError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}") from exc
        raise RequestError(ErrorCode.EXECUTION_ERROR, f"state returned {type(state).__name__}, expected a State")

    async def render(self, env: AnyEnvironment) -> bytes:
        """The env's picture as JSON bytes: `Frame.to_wire()`, or null when it draws none."""
        if type(env).render is Environment.render:
            return b"null"
        from openenv.render import as_frame  # only for envs that draw

        try:
            value = await self.executor.run(type(env), "render", env.render)
            frame = as_frame(value)
        except Exception as exc:
            raise RequestError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}") from exc
        return b"null" if frame is None else dumps(frame.to_wire())

    async def _invoke(
        self, env: AnyEnvironment, call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None
    ) -> Any:
        name = call.name
        try:
            if call.is_async:
                return await self.executor.run_async(getattr(env, f"{name}_async")(*args, **kwargs), timeout_s)
            return await self.executor.call(call.policy, getattr(env, name), args, kwargs, timeout_s)
        except EnvStepTimeout as exc:
            raise RequestError(ErrorCode.TIMEOUT, f"{name} timed out: {exc}") from None
        except RequestError:
            raise
        except Exception as exc:
            raise RequestError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}") from exc

    def _payload(self, env: AnyEnvironment, name: str, obs: Any) -> bytes:
        if not isinstance(obs, Observation):
            raise RequestError(
                ErrorCode.EXECUTION_ERROR,
                f"{type(env).__name__}.{name}() returned {type(obs).__name__}, expected an Observation",
            )
        try:
            return observation_json(obs)
        except Exception as exc:
            raise RequestError(
                ErrorCode.EXECUTION_ERROR, f"the observation could not be encoded as JSON: {exc}"
            ) from exc

    # -- session helpers ------------------------------------------------------------------------

    async def open_session(self, on_expire: Any = None) -> Session:
        return await self.sessions.open(on_expire)

    @contextlib.asynccontextmanager
    async def fresh_env(self) -> AsyncIterator[AnyEnvironment]:
        """A new environment for one stateless request, closed afterwards.

        Raises:
            RequestError: FACTORY_ERROR when the environment cannot be built.
        """
        try:
            env = await self.sessions.build_env()
        except FactoryError as exc:
            raise RequestError(ErrorCode.FACTORY_ERROR, str(exc)) from exc
        try:
            yield env
        finally:
            await self.sessions.close_env(env)


def _env_class_of(factory: Callable[[], AnyEnvironment]) -> type[AnyEnvironment] | None:
    """The env class a factory makes, when that can be told without calling it."""
    if isinstance(factory, type) and issubclass(factory, Environment):
        return factory
    hint = getattr(factory, "__annotations__", {}).get("return") if callable(factory) else None
    return hint if isinstance(hint, type) and issubclass(hint, Environment) else None
