"""`EnvClient`: drive one session of an OpenEnv server (ours or upstream's) from asyncio.

    class EchoEnv(EnvClient[EchoAction, EchoObservation, State]):
        pass                                   # replies are parsed into these classes

    async with EchoEnv("http://127.0.0.1:8000") as env:
        result = await env.reset(seed=1)
        result = await env.step(EchoAction(message="hi"))

`EnvClient[A, O, S](url)` works without a subclass, `GenericEnvClient` speaks plain dicts, and
`.sync()` gives blocking calls for scripts and notebooks. Servers with MCP tools answer
`list_tools()` / `call_tool(name, **arguments)`, and `step(CallToolAction(...))` returns a
`CallToolObservation` whatever the client's observation class. Servers announcing "fork" answer
`snapshot()`, `restore(snap)`, `release(snap)` and `fork(n)` (see `openenv.client._forks`).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from openenv.client._forks import ForksMixin
from openenv.client._settings import hf_token, is_hf_host
from openenv.client._tasks import TasksMixin
from openenv.client._tools import TOOL_OBSERVATIONS, ToolsMixin
from openenv.client._transport import Connection, ws_url_for
from openenv.errors import ConfigurationError, EnvClientError, ProtocolError, server_error_from_frame
from openenv.protocol import (
    CLOSE_REQUEST,
    NO_RENDER_REPLY,
    RENDER_REQUEST,
    RESET_REQUEST,
    STATE_REQUEST,
    STEP_PREFIX,
    dumps,
    loads,
)
from openenv.render import Frame
from openenv.types import StepResult

if TYPE_CHECKING:
    from pathlib import Path

    from openenv.client._hub_service import HubRecord
    from openenv.client.launch import Launch
    from openenv.client.sync import SyncEnvClient

__all__ = ["EnvClient", "SchemaMismatchError"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")

_GRACE_S = 5.0  # beyond a step's own timeout_s, how long the client waits for the server's verdict


class SchemaMismatchError(EnvClientError):
    """A reply did not fit the client's model class: client and server disagree on the schema."""


def _type_args(cls: type) -> tuple[Any, Any, Any] | None:
    for base in getattr(cls, "__orig_bases__", ()):
        origin = typing.get_origin(base)
        if isinstance(origin, type) and issubclass(origin, EnvClient):
            args = typing.get_args(base)
            if len(args) == 3 and not any(isinstance(a, TypeVar) for a in args):
                return args
    return None


def _model_or_none(tp: Any) -> type[BaseModel] | None:
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


class EnvClient(ForksMixin, ToolsMixin, TasksMixin, Generic[ActT, ObsT, StateT]):
    """An async client for one session (one WebSocket, one environment instance) of a server.

    Args:
        base_url: the server's root, `http(s)://` or `ws(s)://`.
        token: bearer token sent as `Authorization` (private Spaces need one). When omitted, the
            ambient Hugging Face token (`HF_TOKEN`) is sent, but only to Hugging Face hosts.
        headers: extra handshake headers.
        connect_timeout_s: limit for connecting and the handshake.
        message_timeout_s: limit for each reply (None waits forever).
        max_message_size_mb: largest reply accepted.
    """

    _action_cls: ClassVar[type[BaseModel] | None] = None
    _observation_cls: ClassVar[type[BaseModel] | None] = None
    _state_cls: ClassVar[type[BaseModel] | None] = None
    _fast_payload: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        args = _type_args(cls)
        if args is not None:
            cls._action_cls, cls._observation_cls, cls._state_cls = (_model_or_none(a) for a in args)
        cls._fast_payload = cls._step_payload is EnvClient._step_payload

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float | None = 60.0,
        max_message_size_mb: float = 100.0,
        provider: Any = None,
    ) -> None:
        self.base_url = base_url
        self.ws_url = ws_url_for(base_url)
        if connect_timeout_s <= 0:
            raise ConfigurationError("connect_timeout_s must be > 0")
        self.connect_timeout_s = connect_timeout_s
        self.message_timeout_s = message_timeout_s
        self.max_message_bytes = int(max_message_size_mb * (1 << 20))
        self._headers = dict(headers or {})
        bearer = token if token is not None else (hf_token() if is_hf_host(base_url) else None)
        if bearer:
            self._headers.setdefault("Authorization", f"Bearer {bearer}")
        self.provider = provider
        # Set by `from_hub` when an OpenEnv Hub service answered: its resolve record (`capacity` card included).
        self.hub_info: HubRecord | None = None
        self._children: list[EnvClient[ActT, ObsT, StateT]] = []
        self._conn: Connection | None = None
        self._obs_model = self._observation_cls
        self._state_model = self._state_cls

    # -- connection -------------------------------------------------------------------------------

    async def connect(self) -> EnvClient[ActT, ObsT, StateT]:
        """Open the session's WebSocket (done for you by `async with` and the first call).

        Raises:
            EnvConnectionError: the server cannot be reached or refused the handshake.
            EnvTimeoutError: no handshake within `connect_timeout_s`.
        """
        if self._conn is not None and not self._conn.closed:
            return self
        if self._obs_model is None and type(self)._observation_cls is None:
            self._resolve_alias_types()
        self._conn = await Connection.open(
            self.ws_url,
            headers=self._headers,
            timeout_s=self.connect_timeout_s,
            max_message_bytes=self.max_message_bytes,
        )
        return self

    def _resolve_alias_types(self) -> None:
        alias = self.__dict__.get("__orig_class__")  # set by typing for EnvClient[A, O, S](url)
        args = typing.get_args(alias) if alias is not None else ()
        if len(args) == 3:
            self._obs_model, self._state_model = _model_or_none(args[1]), _model_or_none(args[2])

    @property
    def server_extensions(self) -> frozenset[str]:
        """Protocol extensions the connected server announced (empty for upstream servers)."""
        return self._conn.extensions if self._conn is not None else frozenset()

    @property
    def server_protocol(self) -> int | None:
        """The protocol version the connected server announced (None: not connected, or an upstream server)."""
        return self._conn.protocol_version if self._conn is not None else None

    async def _live(self, reconnect: bool) -> Connection:
        conn = self._conn
        if conn is None or (reconnect and conn.closed):
            await self.connect()
            conn = self._conn
        return conn  # type: ignore[return-value]

    # -- the API ------------------------------------------------------------------------------------

    async def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start a new episode. Keyword options (`seed`, `episode_id`, env-specific) go to the server.

        A client whose connection was closed (server restart, idle expiry) reconnects here, since
        a new episode needs no old state.
        """
        conn = await self._live(reconnect=True)
        frame = dumps({"type": "reset", "data": kwargs}) if kwargs else RESET_REQUEST
        payload = self._reply(await conn.call(frame, self.message_timeout_s), "observation")
        return self._parse_result(payload)

    async def step(self, action: ActT, *, timeout_s: float | None = None) -> StepResult[ObsT]:
        """Apply one action; returns the observation, reward and done flag.

        Args:
            action: an instance of the action class (or a dict of its fields).
            timeout_s: ask the server to give up on this step after that long (servers of ours
                enforce it; on others it only bounds how long this client waits).

        Raises:
            InvalidActionError: the server rejected the action (`.errors` says why).
            EnvExecutionError: the environment raised; the session stays usable.
            EnvDisconnectedError: the session is gone (server died, idle expiry).
            EnvTimeoutError: no reply in time.
        """
        conn = await self._live(reconnect=False)
        tool_model = TOOL_OBSERVATIONS.get(action.__class__)
        if self._fast_payload or tool_model is not None:
            if isinstance(action, BaseModel):
                body = action.__pydantic_serializer__.to_json(action)
            elif isinstance(action, dict):
                body = dumps(action)
            else:
                raise TypeError(f"step() takes an action model or a dict, not {type(action).__name__}")
        else:
            body = dumps(self._step_payload(action))
        wait = self.message_timeout_s
        if timeout_s is not None:
            if "step-timeout" in conn.extensions:
                frame = b'%s%s,"timeout_s":%s}' % (STEP_PREFIX, body, dumps(float(timeout_s)))
            else:
                frame = STEP_PREFIX + body + b"}"
            wait = timeout_s + _GRACE_S
        else:
            frame = STEP_PREFIX + body + b"}"
        payload = self._reply(await conn.call(frame, wait), "observation")
        if tool_model is not None:
            return self._parse_with(payload, tool_model)
        return self._parse_result(payload)

    async def state(self) -> StateT:
        """The environment's current state (episode id, step count, env-specific fields)."""
        conn = await self._live(reconnect=False)
        return self._parse_state(self._reply(await conn.call(STATE_REQUEST, self.message_timeout_s), "state"))

    async def render(self) -> Frame | None:
        """A picture of the environment now (`openenv.render.Frame`), or None when the server
        does not announce the "render" extension (upstream servers) or the env draws nothing.

        The frame is as the env wrote it: show it through `openenv.render.frame_html`.

        Raises:
            EnvExecutionError: the env's `render()` raised; the session stays usable.
            ProtocolError: the server sent something that is not a frame.
        """
        conn = await self._live(reconnect=False)
        if "render" not in conn.extensions:
            return None
        raw = await conn.call(RENDER_REQUEST, self.message_timeout_s)
        if raw.startswith(NO_RENDER_REPLY):
            return None
        data = self._reply(raw, "render")
        try:
            return Frame.from_wire(data)
        except ValueError as exc:
            raise ProtocolError(
                f"the server's render frame is not valid: {exc} [{self.base_url}]",
                code="UNEXPECTED_FRAME",
                url=self.base_url,
            ) from None

    async def new_session(self) -> EnvClient[ActT, ObsT, StateT]:
        """Another session on the same server: its own WebSocket and environment instance, a
        client of this one's type and settings, connected, and closed when this one closes.

        Raises:
            EnvConnectionError, EnvTimeoutError: as for `connect`.
        """
        child = self._spawn(self.ws_url)
        await child.connect()
        self._children.append(child)
        return child

    def _spawn(self, ws_url: str) -> EnvClient[ActT, ObsT, StateT]:
        """A client of this one's type and settings for the session at `ws_url` (not connected)."""
        child = type(self)(
            self.base_url,
            headers=dict(self._headers),
            connect_timeout_s=self.connect_timeout_s,
            message_timeout_s=self.message_timeout_s,
            max_message_size_mb=self.max_message_bytes / (1 << 20),
        )
        child.ws_url = ws_url
        child._obs_model, child._state_model = self._obs_model, self._state_model
        return child

    async def close(self) -> None:
        """End the session: tell the server, close the socket, stop any provider we started (and
        close the sessions `new_session` opened)."""
        children, self._children = self._children, []
        for child in children:
            await child.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.send_only(CLOSE_REQUEST)
            await conn.close()
        provider, self.provider = self.provider, None
        if provider is not None:
            # Our providers stop in a worker thread (astop); others may offer a sync or async stop.
            stop = (
                getattr(provider, "astop", None)
                or getattr(provider, "stop", None)
                or getattr(provider, "stop_container", None)
            )
            if stop is not None:
                result = stop()
                if hasattr(result, "__await__"):
                    await result

    async def __aenter__(self) -> EnvClient[ActT, ObsT, StateT]:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> Any:
        raise TypeError(
            "EnvClient is async: use 'async with', or '.sync()' for blocking calls: 'with client.sync() as env:'"
        )

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - __enter__ always raises
        return None

    # -- clients that start their own server (openenv.client.launch, openenv.client.resolve) ---------

    @classmethod
    def from_docker_image(cls, image: str, *, provider: Any = None, **options: Any) -> Launch[Any]:
        """Run `image` in a local container (port on 127.0.0.1) and connect to it.

        `await` the result for a connected client, or call `.sync()` on it for a blocking one;
        `close()` stops the container. Client options (token, connect_timeout_s, ...) go to the
        client, the others to `ContainerProvider` (env, port, startup_timeout_s, run_options, ...).

        Raises:
            ProviderStartError: the container did not become healthy (its logs are attached).
            ProviderUnavailableError: no container engine (Docker or Podman) answers.
        """
        from openenv.client.launch import from_docker_image

        return from_docker_image(cls, image, provider=provider, **options)

    @classmethod
    def from_process(cls, env_dir: str | Path, **options: Any) -> Launch[Any]:
        """Run an env folder's server as a local process (in its own cached venv) and connect.

        Like `from_docker_image`; provider options go to `ProcessProvider` (venv, sdk, env, ...).
        """
        from openenv.client.launch import from_process

        return from_process(cls, env_dir, **options)

    @classmethod
    def from_hub(cls, repo_id: str, revision: str | None = None, **options: Any) -> Launch[Any]:
        """Connect to the env `owner/name[@revision]` wherever it can run: an OpenEnv Hub service's
        answer, the running Space, a local container of its image, or a local process of its files
        (see docs/providers.md). `await` it, or call `.sync()` on it. `lock=PATH` (or OPENENV_LOCK)
        connects only to the revision, image and protocol a lock file (`openenv lock`) names. A
        sleeping Space is woken and waited for, its stages logged, at most `wake_timeout_s` (default
        OPENENV_SPACE_WAKE_TIMEOUT_S); past that, or when it answers 402, its image is tried instead.

        Raises:
            ResolutionError: no step worked; `.attempts` says what each step found.
            RemoteCodeError: only local steps are left and they need `trust_remote_code=True`.
            LockMismatchError: the lock does not name this env, or something else than it names was met.
        """
        from openenv.client.resolve import from_hub

        return from_hub(cls, repo_id, revision=revision, **options)

    def sync(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """A blocking view of this client (safe in Jupyter, where a loop is already running)."""
        from openenv.client.sync import SyncEnvClient

        return SyncEnvClient(self)

    # -- hooks (upstream-compatible names; override for custom wire shapes) --------------------------

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        """The `data` of a step frame for `action`."""
        if isinstance(action, BaseModel):
            return action.model_dump()
        if isinstance(action, dict):
            return action
        raise TypeError(f"step() takes an action model or a dict, not {type(action).__name__}")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Build the StepResult of a reset/step reply."""
        return self._parse_with(payload, self._obs_model)

    def _parse_with(self, payload: dict[str, Any], model: type[BaseModel] | None) -> StepResult[Any]:
        obs = payload.get("observation")
        if not isinstance(obs, dict):
            obs = {}
        reward = payload.get("reward")
        done = bool(payload.get("done", False))
        # Beside the observation (upstream 0.10.0 and ours), else inside it (ours, for 0.3.0's clients).
        metadata = payload.get("metadata") or obs.get("metadata") or None
        if model is None:
            return StepResult(obs, reward, done, metadata if isinstance(metadata, dict) else None)
        obs["reward"] = reward
        obs["done"] = done
        try:
            observation = model.model_validate(obs)
        except ValidationError as exc:
            raise SchemaMismatchError(
                f"the server's observation does not fit {model.__name__}: {exc.errors(include_url=False)[:3]}; "
                f"do the client's classes match GET /schema? [{self.base_url}]",
                url=self.base_url,
            ) from None
        return StepResult(observation, reward, done, metadata if isinstance(metadata, dict) else None)

    def _parse_state(self, payload: dict[str, Any]) -> StateT:
        """Build the state object of a state reply."""
        model = self._state_model
        if model is None:
            return payload  # type: ignore[return-value]
        try:
            return model.model_validate(payload)  # type: ignore[return-value]
        except ValidationError as exc:
            raise SchemaMismatchError(
                f"the server's state does not fit {model.__name__}: {exc.errors(include_url=False)[:3]} [{self.base_url}]",
                url=self.base_url,
            ) from None

    # -- internals ----------------------------------------------------------------------------------

    def _reply(self, raw: bytes, expected: str) -> dict[str, Any]:
        try:
            msg = loads(raw)
        except ValueError:
            raise ProtocolError(
                f"the server sent a frame that is not JSON [{self.base_url}]", code="INVALID_JSON", url=self.base_url
            ) from None
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == expected:
            data = msg.get("data")
            return data if isinstance(data, dict) else {}
        if kind == "error":
            raise server_error_from_frame(msg.get("data"), self.base_url)
        raise ProtocolError(
            f"expected a {expected!r} frame, got {raw[:200]!s} [{self.base_url}]",
            code="UNEXPECTED_FRAME",
            url=self.base_url,
        )

    def __repr__(self) -> str:
        state = "connected" if self._conn is not None and not self._conn.closed else "not connected"
        return f"<{type(self).__name__} {self.base_url} {state}>"
