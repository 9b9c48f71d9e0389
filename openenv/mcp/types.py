"""The MCP models on the wire: tool descriptions, tool errors, and the two tool actions.

They match upstream OpenEnv's field for field, so either side's client and server understand the
other: `ListToolsAction` is `{"type": "list_tools"}`, `CallToolAction` is `{"type": "call_tool",
"tool_name": ..., "arguments": {...}}`, and their replies are `ListToolsObservation` (`tools`)
and `CallToolObservation` (`tool_name`, `result`, `error`). Only pydantic is needed, so clients
import this without the server stack.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.types import Action, Observation

__all__ = [
    "RESERVED_TOOL_NAMES",
    "CallToolAction",
    "CallToolObservation",
    "ListToolsAction",
    "ListToolsObservation",
    "Tool",
    "ToolError",
    "ToolErrorType",
]

# The names of the environment's own API; a tool may not shadow them.
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})


class Tool(BaseModel):
    """What `tools/list` says about one tool."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The tool's name, used in CallToolAction.tool_name.")
    description: str = Field(default="", description="What the tool does, for the agent.")
    input_schema: dict[str, Any] = Field(default_factory=dict, description="JSON Schema of the tool's arguments.")

    @classmethod
    def listed(cls, raw: list[Any]) -> list[Tool]:
        """The tools of a `tools/list` result's `tools` list (MCP's `inputSchema` or the snake_case
        spelling; entries that are not objects left out)."""
        return [
            cls(
                name=str(t.get("name", "")),
                description=t.get("description") or "",
                input_schema=t.get("inputSchema", t.get("input_schema")) or {},
            )
            for t in raw
            if isinstance(t, dict)
        ]


class ToolErrorType(enum.StrEnum):
    """Why a tool call failed (upstream's five categories)."""

    EXECUTION_ERROR = "execution_error"
    INVALID_ARGS = "invalid_args"
    TRANSPORT_ERROR = "transport_error"
    TOOL_NOT_FOUND = "tool_not_found"
    TIMEOUT = "timeout"


class ToolError(BaseModel):
    """A failed tool call: its category and a message that says what went wrong."""

    model_config = ConfigDict(extra="forbid")

    error_type: ToolErrorType
    message: str


class ListToolsAction(Action):
    """Step action that asks for the environment's tools (no reset needed first)."""

    type: Literal["list_tools"] = "list_tools"


class CallToolAction(Action):
    """Step action that calls one tool with keyword arguments."""

    type: Literal["call_tool"] = "call_tool"
    tool_name: str = Field(description="Name of the tool, as listed by ListToolsAction.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


class ListToolsObservation(Observation):
    """Reply to ListToolsAction."""

    tools: list[Tool] = Field(default_factory=list)


class CallToolObservation(Observation):
    """Reply to CallToolAction: the tool's return value, or `error` when the call failed."""

    tool_name: str
    result: Any = None
    error: ToolError | None = None
