"""OpenEnv: isolated environments for agentic RL, driven with `reset` / `step` / `state`.

Environment authors subclass `Environment` and serve it with `create_app`; trainers and
notebooks drive any OpenEnv server with `EnvClient` (async), `.sync()`, or `GenericEnvClient`.
Environments expose MCP tools with `@tool` and compute rewards with rubrics (`Rubric`,
`WeightedSum`, `Gate`, `Sequential`, `TrajectoryRubric`).
Server-side names load lazily, so a client-only install never imports the web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv._lazy import lazy_attributes

__version__ = "0.1.0"

__all__ = [
    "Action",
    "CallToolAction",
    "CallToolObservation",
    "CapacityReachedError",
    "ConfigurationError",
    "EnvClient",
    "EnvClientError",
    "EnvConnectionError",
    "EnvDisconnectedError",
    "EnvExecutionError",
    "EnvFactoryError",
    "EnvServerError",
    "EnvTimeoutError",
    "Environment",
    "EnvironmentMetadata",
    "Gate",
    "GenericEnvClient",
    "InvalidActionError",
    "ListToolsAction",
    "ListToolsObservation",
    "NoTasksError",
    "Observation",
    "OpenEnvError",
    "ProtocolError",
    "Rubric",
    "RubricError",
    "Sequential",
    "ServerSettings",
    "Snapshot",
    "SnapshotError",
    "State",
    "StepResult",
    "SyncEnvClient",
    "Tool",
    "ToolCallError",
    "ToolError",
    "ToolErrorType",
    "TrajectoryRubric",
    "WeightedSum",
    "create_app",
    "tool",
]

_LAZY = {
    "Action": "openenv.types",
    "Observation": "openenv.types",
    "State": "openenv.types",
    "StepResult": "openenv.types",
    "EnvironmentMetadata": "openenv.types",
    **{
        name: "openenv.mcp.types"
        for name in (
            "CallToolAction",
            "CallToolObservation",
            "ListToolsAction",
            "ListToolsObservation",
            "Tool",
            "ToolError",
            "ToolErrorType",
        )
    },
    "tool": "openenv.mcp.tools",
    **{name: "openenv.rubrics" for name in ("Gate", "Rubric", "Sequential", "TrajectoryRubric", "WeightedSum")},
    "Environment": "openenv.env",
    "EnvClient": "openenv.client",
    "SyncEnvClient": "openenv.client",
    "GenericEnvClient": "openenv.client",
    "create_app": "openenv.server.app",
    "ServerSettings": "openenv.server.settings",
    **{
        name: "openenv.errors"
        for name in (
            "CapacityReachedError",
            "ConfigurationError",
            "EnvClientError",
            "EnvConnectionError",
            "EnvDisconnectedError",
            "EnvExecutionError",
            "EnvFactoryError",
            "EnvServerError",
            "EnvTimeoutError",
            "InvalidActionError",
            "NoTasksError",
            "OpenEnvError",
            "ProtocolError",
            "RubricError",
            "SnapshotError",
            "ToolCallError",
        )
    },
    "Snapshot": "openenv.types",
}

_EXTRAS = {"openenv.server.app": "server"}


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY, extras=_EXTRAS)

if TYPE_CHECKING:
    from openenv.client import EnvClient, GenericEnvClient, SyncEnvClient
    from openenv.env import Environment
    from openenv.errors import (
        CapacityReachedError,
        ConfigurationError,
        EnvClientError,
        EnvConnectionError,
        EnvDisconnectedError,
        EnvExecutionError,
        EnvFactoryError,
        EnvServerError,
        EnvTimeoutError,
        InvalidActionError,
        NoTasksError,
        OpenEnvError,
        ProtocolError,
        RubricError,
        SnapshotError,
        ToolCallError,
    )
    from openenv.mcp.tools import tool
    from openenv.mcp.types import (
        CallToolAction,
        CallToolObservation,
        ListToolsAction,
        ListToolsObservation,
        Tool,
        ToolError,
        ToolErrorType,
    )
    from openenv.rubrics import Gate, Rubric, Sequential, TrajectoryRubric, WeightedSum
    from openenv.server.app import create_app
    from openenv.server.settings import ServerSettings
    from openenv.types import Action, EnvironmentMetadata, Observation, Snapshot, State, StepResult
