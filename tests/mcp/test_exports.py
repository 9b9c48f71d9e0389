"""The public names of MCP and rubrics: exported from `openenv`, light enough for a client."""

from __future__ import annotations

import subprocess
import sys

import openenv

NEW_NAMES = [
    "CallToolAction",
    "CallToolObservation",
    "Gate",
    "ListToolsAction",
    "ListToolsObservation",
    "Rubric",
    "RubricError",
    "Sequential",
    "Tool",
    "ToolCallError",
    "ToolError",
    "ToolErrorType",
    "TrajectoryRubric",
    "WeightedSum",
    "tool",
]


def test_tool_and_rubric_names_are_exported() -> None:
    for name in NEW_NAMES:
        assert name in openenv.__all__
        assert getattr(openenv, name) is not None


def test_tools_and_rubrics_do_not_pull_in_the_server_stack() -> None:
    code = (
        "import sys, openenv\n"
        "from openenv import EnvClient, CallToolAction, ToolCallError, tool, Rubric, WeightedSum, Environment\n"
        "from openenv.rubrics import TrajectoryRubric\n"
        "heavy = sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'httpx') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
