"""The client's MCP side: `list_tools()` and `call_tool()` over the session's WebSocket.

Both send a JSON-RPC request in an `mcp` frame, which our servers and upstream's answer on the
same connection as `reset` / `step`. A tool call made this way is not a step: it earns no reward
and leaves the episode's step count alone. To have a tool call count as a step (and get its
reward), send `step(CallToolAction(...))` instead.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel

from openenv.errors import ProtocolError, ToolCallError
from openenv.mcp.jsonrpc import tool_error_type
from openenv.mcp.types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolErrorType,
)
from openenv.protocol import MCP_FRAME, dumps

__all__ = ["TOOL_OBSERVATIONS", "ToolsMixin"]

# Tool actions get their own observation class back, whatever the client's own class is.
TOOL_OBSERVATIONS: dict[type, type[BaseModel]] = {
    ListToolsAction: ListToolsObservation,
    CallToolAction: CallToolObservation,
}


class ToolsMixin:
    """`list_tools` / `call_tool` for `EnvClient` (which provides `_live`, `_reply`, `base_url`)."""

    base_url: str
    message_timeout_s: float | None
    _tools_cache: list[Tool] | None = None
    _rpc_ids = itertools.count(1)  # JSON-RPC ids, unique in the process

    async def list_tools(self, use_cache: bool = True) -> list[Tool]:
        """The server's tools: name, description and JSON Schema of the arguments.

        Args:
            use_cache: reuse the list from an earlier call (tools do not change in a session).

        Raises:
            ToolCallError: the server does not serve tools (e.g. an upstream env without MCP).
            EnvDisconnectedError, EnvTimeoutError: as for `step`.
        """
        if use_cache and self._tools_cache is not None:
            return list(self._tools_cache)
        result = await self._rpc("tools/list", {}, None)
        raw = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(raw, list):
            raise ProtocolError(
                f"tools/list replied without a tools list: {str(result)[:200]} [{self.base_url}]",
                code="UNEXPECTED_FRAME",
                url=self.base_url,
            )
        tools = Tool.listed(raw)
        self._tools_cache = tools
        return list(tools)

    async def call_tool(self, name: str, /, **arguments: Any) -> Any:
        """Call tool `name` with keyword arguments; returns what the tool returned (as JSON data).

        Raises:
            ToolCallError: unknown tool, arguments that do not fit its schema, the tool raised,
                or it ran past its time limit; `.error_type` says which.
            EnvDisconnectedError, EnvTimeoutError: as for `step`.
        """
        result = await self._rpc("tools/call", {"name": name, "arguments": arguments}, name)
        if not isinstance(result, dict):
            return result
        if result.get("isError") or result.get("is_error"):
            raise ToolCallError(
                f"tool {name!r} failed: {_text(result)} [{self.base_url}]",
                error_type=ToolErrorType.EXECUTION_ERROR.value,
                tool_name=name,
                url=self.base_url,
            )
        if "data" in result:  # ours and upstream's: the plain return value
            return result["data"]
        structured = result.get("structuredContent", result.get("structured_content"))
        if isinstance(structured, dict):
            return structured["result"] if structured.keys() == {"result"} else structured
        return _text(result)

    async def _rpc(self, method: str, params: dict[str, Any], tool_name: str | None) -> Any:
        conn = await self._live(reconnect=False)  # type: ignore[attr-defined]
        request = {"jsonrpc": "2.0", "id": next(self._rpc_ids), "method": method, "params": params}
        frame = MCP_FRAME % dumps(request)
        reply = self._reply(await conn.call(frame, self.message_timeout_s), "mcp")  # type: ignore[attr-defined]
        error = reply.get("error")
        if isinstance(error, dict):
            kind = tool_error_type(error)
            what = f"tool {tool_name!r}" if tool_name else method
            raise ToolCallError(
                f"{what} failed ({kind.value}): {error.get('message', 'unknown error')} [{self.base_url}]",
                error_type=kind.value,
                tool_name=tool_name,
                code=error.get("code"),
                url=self.base_url,
            )
        return reply.get("result")


def _text(result: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict) and c.get("type") == "text"]
    return "\n".join(parts)
