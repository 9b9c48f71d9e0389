"""The coding environment's models: Python code in; its output, exit code and timing out."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv import Action, Observation, State


class CodeAction(Action):
    """Python source to run in the episode's sandbox."""

    code: str = Field(max_length=200_000, description="Python source, run like `python -c`.")
    persist: bool = Field(
        default=False,
        description="Run in the episode's persistent interpreter, so variables, imports and functions "
        "from earlier persist=true steps are still there. False: a fresh interpreter for this step only.",
    )


class CodeObservation(Observation):
    """What the code printed and how it ended. Reward: 1 on exit code 0, -1 on a timeout, else 0."""

    stdout: str = Field(default="", description="Standard output (cut at the server's limit).")
    stderr: str = Field(default="", description="Standard error, including the traceback of an uncaught exception.")
    exit_code: int = Field(
        default=0, description="0 on success, 1 on an uncaught exception, -N when killed by signal N."
    )
    timed_out: bool = Field(default=False, description="The step ran past the time limit and was killed.")
    truncated: bool = Field(default=False, description="stdout or stderr was longer than the limit and was cut.")
    duration_s: float = Field(default=0.0, ge=0, description="Wall-clock seconds the step took.")
    interpreter_restarted: bool = Field(
        default=False,
        description="A persist=true step found its interpreter gone (timeout, crash, exit) and started a new one: "
        "earlier variables are lost.",
    )


class CodingState(State):
    """Episode id, step count, and the sandbox's limits and isolation layers."""

    timeout_s: float = 0.0
    memory_mb: int = 0
    isolation: dict[str, Any] = Field(default_factory=dict)
