"""MCP tools for environments: `@tool` methods, their wire models, and JSON-RPC helpers.

An environment exposes tools by decorating methods with `@tool`; the server then answers
`tools/list` / `tools/call` on `POST /mcp` and the WebSocket `mcp` message, and accepts the step
actions `ListToolsAction` / `CallToolAction`. Clients call `list_tools()` / `call_tool()`.
See docs/mcp.md.
"""

from __future__ import annotations

from openenv.mcp.tools import ToolArgumentsError, ToolSpec, tool, tools_of
from openenv.mcp.types import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)

__all__ = [
    "RESERVED_TOOL_NAMES",
    "CallToolAction",
    "CallToolObservation",
    "ListToolsAction",
    "ListToolsObservation",
    "Tool",
    "ToolArgumentsError",
    "ToolError",
    "ToolErrorType",
    "ToolSpec",
    "tool",
    "tools_of",
]
