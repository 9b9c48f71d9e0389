"""The error tree of the `openenv` package.

```
OpenEnvError
├── ConfigurationError               a setting or argument is wrong; the message says which
├── NoTasksError                     (also NotImplementedError) the environment has no task set (Task API)
├── RubricError                      a rubric was misused or returned something not a number
├── SnapshotUnsupportedError         (also NotImplementedError) the environment cannot be snapshotted
├── EnvClientError                   raised by clients
│   ├── EnvConnectionError           (also ConnectionError) the server cannot be reached
│   ├── EnvTimeoutError              (also TimeoutError) connect or reply took too long
│   ├── EnvDisconnectedError         (also ConnectionError) the session's connection ended
│   ├── ToolCallError                (also RuntimeError) an MCP tool call failed; `.error_type` says why
│   ├── LockMismatchError            a lock file (openenv.lock) names another env, revision, image or protocol
│   └── EnvServerError               (also RuntimeError) the server answered with an error frame
│       ├── InvalidActionError           VALIDATION_ERROR
│       ├── EnvExecutionError            EXECUTION_ERROR: the environment raised
│       ├── CapacityReachedError         CAPACITY_REACHED
│       ├── EnvFactoryError              FACTORY_ERROR: the environment could not be built
│       ├── SnapshotError                SNAPSHOT_*, FORK_UNSUPPORTED, SESSION_BUSY (the "fork" extension)
│       └── ProtocolError                INVALID_JSON, UNKNOWN_TYPE, MESSAGE_TOO_LARGE, SESSION_ERROR...
├── ProviderError                    starting or stopping an env server (openenv.client.providers)
│   ├── ProviderUnavailableError         the system behind a provider (container engine, uv, a cluster) is missing
│   └── ProviderStartError               the server did not come up; `.logs` holds its last output
├── ResolutionError                  `from_hub` found no way to run the env; `.attempts` says why per step
│   └── RemoteCodeError                  running it locally needs trust_remote_code=True
└── (server side) EnvStepTimeout     an environment call ran past its timeout
```
Every client error names the URL it was talking to. `EnvServerError.code` is the server's
error code; `EnvServerError.data` is the whole error frame payload.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CapacityReachedError",
    "ConfigurationError",
    "EnvClientError",
    "EnvConnectionError",
    "EnvDisconnectedError",
    "EnvExecutionError",
    "EnvFactoryError",
    "EnvServerError",
    "EnvStepTimeout",
    "EnvTimeoutError",
    "InvalidActionError",
    "LockMismatchError",
    "NoTasksError",
    "OpenEnvError",
    "ProtocolError",
    "ProviderError",
    "ProviderStartError",
    "ProviderUnavailableError",
    "RemoteCodeError",
    "ResolutionError",
    "RubricError",
    "SnapshotError",
    "SnapshotUnsupportedError",
    "ToolCallError",
    "server_error_from_frame",
]


class OpenEnvError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigurationError(OpenEnvError, ValueError):
    """A setting or argument is wrong; the message says which and what to do."""


class NoTasksError(OpenEnvError, NotImplementedError):
    """The environment has no task set (its class does not override `list_splits` / `list_tasks`)."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method} is not supported for this environment: it has no task set (its class does not override "
            "list_splits and list_tasks)"
        )


class RubricError(OpenEnvError, ValueError):
    """A rubric was misused (e.g. an async one scored synchronously) or returned a non-number."""


class EnvStepTimeout(OpenEnvError, TimeoutError):
    """An environment call ran past its time limit (raised inside servers)."""


class SnapshotUnsupportedError(OpenEnvError, NotImplementedError):
    """The environment cannot be snapshotted or restored (see `Environment.SNAPSHOT_UNSUPPORTED`)."""


class EnvClientError(OpenEnvError):
    """Base of the errors a client raises. `url` is the endpoint it was talking to."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class EnvConnectionError(EnvClientError, ConnectionError):
    """The server could not be reached or refused the connection."""


class EnvTimeoutError(EnvClientError, TimeoutError):
    """Connecting, or waiting for a reply, took longer than the configured timeout."""


class EnvDisconnectedError(EnvClientError, ConnectionError):
    """The connection ended: the server closed it, crashed, or the session expired."""

    def __init__(self, message: str, *, url: str | None = None, close_code: int | None = None) -> None:
        super().__init__(message, url=url)
        self.close_code = close_code


class ToolCallError(EnvClientError, RuntimeError):
    """An MCP tool call (or tool listing) failed.

    Attributes:
        error_type: one of "tool_not_found", "invalid_args", "execution_error", "timeout",
            "transport_error" (upstream's categories).
        tool_name: the tool that was called (None for a listing).
        code: the JSON-RPC error code, when the failure came as one.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str,
        tool_name: str | None = None,
        code: int | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.error_type = error_type
        self.tool_name = tool_name
        self.code = code


class LockMismatchError(EnvClientError):
    """A client built from a lock file met something the lock does not name: an env not in it, another
    revision or image digest, or a server speaking another protocol version. Re-run `openenv lock`.

    Attributes:
        env: the env id (owner/name) concerned.
        expected: what the lock says (None when the env is not in the lock).
        found: what was asked for or met instead.
    """

    def __init__(
        self,
        message: str,
        *,
        env: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.env = env
        self.expected = expected
        self.found = found


class EnvServerError(EnvClientError, RuntimeError):
    """The server answered with an error frame.

    Attributes:
        code: the protocol error code, e.g. ``"VALIDATION_ERROR"``.
        data: the error frame's whole payload (``message``, ``code`` and any details).
    """

    def __init__(self, message: str, *, code: str, data: dict[str, Any] | None = None, url: str | None = None) -> None:
        super().__init__(message, url=url)
        self.code = code
        self.data = data or {}


class InvalidActionError(EnvServerError):
    """The action (or message) did not validate; `errors` holds pydantic's list."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.data.get("errors") or [])


class EnvExecutionError(EnvServerError):
    """The environment raised while handling the request; the session stays usable."""


class CapacityReachedError(EnvServerError):
    """The server is at its session capacity; try later or another replica."""

    @property
    def active_sessions(self) -> int | None:
        return self.data.get("active_sessions")

    @property
    def max_sessions(self) -> int | None:
        return self.data.get("max_sessions")


class EnvFactoryError(EnvServerError):
    """The server could not build an environment instance for this session."""


class SnapshotError(EnvServerError):
    """A snapshot, restore or fork was refused; `.code` says why, and the session stays usable.

    Codes: SNAPSHOT_NOT_FOUND (unknown, released or another session's id), SNAPSHOT_EXPIRED,
    SNAPSHOT_LIMIT (too many or too large: release some), FORK_UNSUPPORTED (the env or server
    cannot), SESSION_BUSY (a timed-out step still runs). A fork past capacity is CapacityReachedError.
    """


class ProtocolError(EnvServerError):
    """The server did not understand a frame (bad JSON, unknown type, too large...)."""


_BY_CODE: dict[str, type[EnvServerError]] = {
    "VALIDATION_ERROR": InvalidActionError,
    "EXECUTION_ERROR": EnvExecutionError,
    "CAPACITY_REACHED": CapacityReachedError,
    "FACTORY_ERROR": EnvFactoryError,
    "SNAPSHOT_NOT_FOUND": SnapshotError,
    "SNAPSHOT_EXPIRED": SnapshotError,
    "SNAPSHOT_LIMIT": SnapshotError,
    "FORK_UNSUPPORTED": SnapshotError,
    "SESSION_BUSY": SnapshotError,
}

_HINTS: dict[str, str] = {
    "VALIDATION_ERROR": "check the action against GET /schema",
    "CAPACITY_REACHED": "close other sessions, retry later, or raise the server's max_sessions",
    "FACTORY_ERROR": "the server cannot build the environment; see the server log",
    "MESSAGE_TOO_LARGE": "send smaller frames or raise the server's max_message_bytes",
    "SNAPSHOT_NOT_FOUND": "use an id this session's snapshot() returned and has not released",
    "SNAPSHOT_EXPIRED": "take a new snapshot; unused ones expire after the server's snapshot_ttl_s",
    "SNAPSHOT_LIMIT": "release snapshots you no longer need (release(snapshot)) or raise the server's limits",
    "SESSION_BUSY": "a timed-out call still runs in the environment; retry once it ends",
}


def server_error_from_frame(data: Any, url: str | None = None) -> EnvServerError:
    """Build the typed exception for the `data` of an error frame."""
    if not isinstance(data, dict):
        data = {"message": str(data), "code": "UNKNOWN"}
    code = str(data.get("code") or "UNKNOWN")
    message = str(data.get("message") or "unknown error")
    text = f"{code}: {message}"
    if code == "VALIDATION_ERROR" and data.get("errors"):
        details = "; ".join(_describe_pydantic_error(e) for e in data["errors"][:5])
        text = f"{text} ({details})"
    hint = _HINTS.get(code)
    if hint:
        text = f"{text} — {hint}"
    if url:
        text = f"{text} [{url}]"
    return _BY_CODE.get(code, ProtocolError)(text, code=code, data=data, url=url)


def _describe_pydantic_error(err: Any) -> str:
    if not isinstance(err, dict):
        return str(err)
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
    return f"{loc or '<root>'}: {err.get('msg', '')}"


class ProviderError(OpenEnvError):
    """Starting, stopping or inspecting an env server through a provider failed."""


class ProviderUnavailableError(ProviderError):
    """The system a provider needs (a container engine, swarm, uv/venv, a cluster) is not available."""


class ProviderStartError(ProviderError):
    """The env server did not become healthy. `logs` holds the last lines it printed."""

    def __init__(self, message: str, *, logs: str = "", url: str | None = None) -> None:
        super().__init__(message)
        self.logs = logs
        self.url = url


class ResolutionError(OpenEnvError):
    """`from_hub` could not run the env. `attempts` lists (step, outcome) for every step tried."""

    def __init__(self, message: str, *, attempts: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.attempts = list(attempts or [])


class RemoteCodeError(ResolutionError):
    """Running the env locally would execute code from the Hub; pass trust_remote_code=True."""
