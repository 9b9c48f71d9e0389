"""The wire protocol: message types, error codes and JSON encoding, in one place.

Server and client both import from here, so the two ends cannot drift apart. The protocol is
upstream OpenEnv's (see docs/protocol.md); what we add is marked as an extension and is only used
when both ends are ours.
"""

from __future__ import annotations

import base64
import enum
import math
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

__all__ = [
    "CLOSE_REQUEST",
    "EXTENSIONS",
    "FORK_EXTENSION",
    "FORK_FRAME",
    "MCP_FRAME",
    "NO_RENDER_REPLY",
    "OBSERVATION_FRAME",
    "PROTOCOL_HEADER",
    "PROTOCOL_VERSION",
    "RELEASE_FRAME",
    "RENDER_FRAME",
    "RENDER_REQUEST",
    "RESET_REQUEST",
    "SNAPSHOT_FRAME",
    "STATE_FRAME",
    "STATE_REQUEST",
    "STEP_PREFIX",
    "ErrorCode",
    "JSONDecodeError",
    "MsgType",
    "dumps",
    "error_frame",
    "loads",
    "observation_json",
    "observation_payload",
]

PROTOCOL_VERSION = 1
# Our servers announce themselves in the WebSocket handshake reply with this header
# ("1; ext=a,b"); upstream clients ignore unknown headers, ours read it for free at connect.
PROTOCOL_HEADER = "x-openenv-protocol"
# Extensions this implementation supports (advertised in /metadata and the header above).
# "render": {"type": "render"} on /ws (and POST /render) answers with the env's picture.
EXTENSIONS: tuple[str, ...] = ("step-timeout", "render")
# "fork": snapshot / restore / release / fork frames on /ws. Announced only by servers whose env
# can be snapshotted (`Environment.supports_snapshots()`), after the extensions above.
FORK_EXTENSION = "fork"


class MsgType(enum.StrEnum):
    """`type` of a WebSocket frame."""

    RESET = "reset"
    STEP = "step"
    STATE = "state"
    CLOSE = "close"
    MCP = "mcp"
    RENDER = "render"
    SNAPSHOT = "snapshot"  # the "fork" extension: these four, and upstream's names below
    RESTORE = "restore"
    RELEASE = "release"
    FORK = "fork"
    GET_STATE = "get_state"  # = snapshot
    SET_STATE = "set_state"  # = restore
    OBSERVATION = "observation"
    ERROR = "error"


# The frames as bytes, for the hot paths: a constant `%`-formatted, never a dict through the
# encoder. A `*_FRAME` template takes the frame's `data` as JSON bytes: `OBSERVATION_FRAME % payload`.
OBSERVATION_FRAME = b'{"type":"observation","data":%b}'
STATE_FRAME = b'{"type":"state","data":%b}'
RENDER_FRAME = b'{"type":"render","data":%b}'
MCP_FRAME = b'{"type":"mcp","data":%b}'
SNAPSHOT_FRAME = b'{"type":"snapshot","data":%b}'
RELEASE_FRAME = b'{"type":"release","data":%b}'
FORK_FRAME = b'{"type":"fork","data":%b}'
NO_RENDER_REPLY = RENDER_FRAME % b"null"  # the env draws nothing
# What a client sends with no data of its own; a step is `STEP_PREFIX + action + b"}"`
# (with `,"timeout_s":N` before the brace for the step-timeout extension).
RESET_REQUEST = b'{"type":"reset","data":{}}'
STATE_REQUEST = b'{"type":"state"}'
RENDER_REQUEST = b'{"type":"render"}'
CLOSE_REQUEST = b'{"type":"close"}'
STEP_PREFIX = b'{"type":"step","data":'


class ErrorCode(enum.StrEnum):
    """`code` of an error frame. The first seven are upstream's; the rest are ours."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    TIMEOUT = "TIMEOUT"
    # The "fork" extension's refusals (the session stays usable after each).
    SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"
    SNAPSHOT_EXPIRED = "SNAPSHOT_EXPIRED"
    SNAPSHOT_LIMIT = "SNAPSHOT_LIMIT"
    FORK_UNSUPPORTED = "FORK_UNSUPPORTED"
    SESSION_BUSY = "SESSION_BUSY"


JSONDecodeError = orjson.JSONDecodeError
loads = orjson.loads

_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _default(obj: Any) -> Any:
    # Values orjson does not know natively: models nested in dicts, sets, bytes, numpy scalars.
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if hasattr(obj, "tolist"):  # numpy arrays of object dtype, numpy/torch scalars, tensors
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot encode a {type(obj).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """Encode to compact JSON bytes (numpy arrays, models, sets and bytes included)."""
    return orjson.dumps(obj, default=_default, option=_OPTS)


def observation_payload(dumped: dict[str, Any]) -> dict[str, Any]:
    """Turn a dumped Observation into the wire's `{"observation", "reward", "done"}`.

    `reward` and `done` are lifted beside the observation. Upstream 0.3.0 drops `metadata`; we
    keep it inside the observation when it is not empty (upstream clients accept the field), and
    also beside it, where upstream 0.10.0's clients read it.
    """
    reward = dumped.pop("reward", None)
    done = dumped.pop("done", False)
    if not dumped.get("metadata", True):
        del dumped["metadata"]
    if isinstance(reward, float) and not math.isfinite(reward):
        reward = None
    payload = {"observation": dumped, "reward": reward, "done": bool(done)}
    if dumped.get("metadata"):
        payload["metadata"] = dumped["metadata"]
    return payload


_EXCLUDE_LIFTED = frozenset({"reward", "done"})
_EXCLUDE_LIFTED_AND_METADATA = frozenset({"reward", "done", "metadata"})


def observation_json(obs: BaseModel) -> bytes:
    """`observation_payload` of an Observation, straight to JSON bytes.

    pydantic's serializer writes the fields; only the two lifted values are encoded here. Falls
    back to the dict route for values pydantic cannot serialize (numpy arrays and the like).
    """
    metadata = getattr(obs, "metadata", None)
    exclude = _EXCLUDE_LIFTED if metadata else _EXCLUDE_LIFTED_AND_METADATA
    try:
        # The stub asks for a set; pydantic-core takes any set, and a shared constant stays frozen.
        body = obs.__pydantic_serializer__.to_json(obs, exclude=exclude)  # type: ignore[arg-type]
    except (PydanticSerializationError, TypeError, ValueError):
        return dumps(observation_payload(obs.model_dump()))
    reward = getattr(obs, "reward", None)
    if type(reward) is float and not math.isfinite(reward):
        reward = None
    done = b"true" if getattr(obs, "done", False) else b"false"
    if metadata:  # upstream 0.10.0 reads it at the top level too (and rejects a null there: left out when empty)
        try:
            return b'{"observation":%b,"reward":%b,"done":%b,"metadata":%b}' % (
                body,
                orjson.dumps(reward),
                done,
                dumps(metadata),
            )
        except (TypeError, ValueError):
            pass  # not JSON-able as is: it is still inside the observation, where pydantic wrote it
    return b'{"observation":%b,"reward":%b,"done":%b}' % (body, orjson.dumps(reward), done)


def error_frame(code: ErrorCode, message: str, **details: Any) -> bytes:
    """Encode an error frame: `{"type": "error", "data": {"message", "code", ...}}`."""
    return dumps({"type": "error", "data": {"message": message, "code": code.value, **details}})
