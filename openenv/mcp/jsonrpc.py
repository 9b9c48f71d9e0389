"""JSON-RPC 2.0 as MCP uses it: error codes, reply shapes, and how tool errors map to codes.

Tool failures travel as JSON-RPC errors whose `data` is the structured `ToolError`
(`{"error_type", "message", "tool_name"}`), so any JSON-RPC client sees a failure and ours
rebuilds the typed error. Servers that send no `data` (upstream's) are classified from the code
and message.
"""

from __future__ import annotations

import enum
from typing import Any

from openenv.mcp.types import ToolErrorType

__all__ = ["RpcCode", "rpc_error", "rpc_result", "tool_error_code", "tool_error_type"]


class RpcCode(enum.IntEnum):
    """JSON-RPC 2.0 error codes (the standard five, and two server-defined ones for tools)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000
    TOOL_TIMEOUT = -32001


_CODE_BY_TOOL_ERROR = {
    ToolErrorType.TOOL_NOT_FOUND: RpcCode.INVALID_PARAMS,
    ToolErrorType.INVALID_ARGS: RpcCode.INVALID_PARAMS,
    ToolErrorType.EXECUTION_ERROR: RpcCode.SERVER_ERROR,
    ToolErrorType.TIMEOUT: RpcCode.TOOL_TIMEOUT,
    ToolErrorType.TRANSPORT_ERROR: RpcCode.INTERNAL_ERROR,
}


_TOOL_ERROR_VALUES = frozenset(t.value for t in ToolErrorType)


def rpc_result(request_id: Any, result: Any) -> dict[str, Any]:
    """A success reply."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error reply; `data` is left out when None."""
    error: dict[str, Any] = {"code": int(code), "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def tool_error_code(error_type: ToolErrorType) -> RpcCode:
    """The JSON-RPC code a server uses for a tool failure of this type."""
    return _CODE_BY_TOOL_ERROR[error_type]


def tool_error_type(error: dict[str, Any]) -> ToolErrorType:
    """Classify a JSON-RPC error object from any server as a tool failure type."""
    data = error.get("data")
    if isinstance(data, dict) and data.get("error_type") in _TOOL_ERROR_VALUES:
        return ToolErrorType(data["error_type"])
    code = error.get("code")
    message = str(error.get("message", "")).lower()
    if code == RpcCode.TOOL_TIMEOUT or "timed out" in message or "timeout" in message:
        return ToolErrorType.TIMEOUT
    if "unknown tool" in message or "not found" in message:
        return ToolErrorType.TOOL_NOT_FOUND
    if code == RpcCode.INVALID_PARAMS or "validation error" in message or "invalid argument" in message:
        return ToolErrorType.INVALID_ARGS
    if code in (RpcCode.PARSE_ERROR, RpcCode.INVALID_REQUEST, RpcCode.METHOD_NOT_FOUND):
        return ToolErrorType.TRANSPORT_ERROR
    return ToolErrorType.EXECUTION_ERROR
