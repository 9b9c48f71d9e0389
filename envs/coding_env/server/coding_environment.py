"""The coding environment: each step runs the agent's Python code in the episode's sandbox.

Reward is plain for now: 1.0 when the code exits with 0, -1.0 when it is killed for running past
the time limit, 0.0 otherwise, and 0.0 for code that is empty or only blank (nothing was done, so
nothing is earned: the Hub's reward check flagged the full score an empty answer used to get). (A rubric that grades output against tests would replace
`_reward` once the rubrics framework lands.)
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from openenv import Environment

from .sandbox import CellResult, Sandbox, isolation_report, preflight
from .settings import SandboxSettings, get_settings

try:
    from ..models import CodeAction, CodeObservation, CodingState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import CodeAction, CodeObservation, CodingState  # type: ignore[no-redef]


class CodingEnvironment(Environment[CodeAction, CodeObservation, CodingState]):
    """Runs Python code in a sandbox and returns stdout, stderr and the exit code."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Said to clients that ask for a snapshot or fork (the "fork" extension is not announced).
    SNAPSHOT_UNSUPPORTED = (
        "its state is a live sandboxed Python process (interpreter memory, open files, child "
        "processes), which cannot be copied soundly; replay the episode's actions to get back to a state"
    )

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or get_settings()
        # The server builds environments off its event loop: check here, once, that sandboxes can
        # be made, so a machine that cannot isolate code is reported at start-up (/health), not
        # at the first step.
        preflight(self.settings)
        self._sandbox: Sandbox | None = None
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._max_steps: int | None = None
        self._last: tuple[str, CellResult] | None = None
        self._steps = 0

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, max_steps: int | None = None, **kwargs: Any
    ) -> CodeObservation:
        """Start an episode with a fresh sandbox.

        Args:
            max_steps: end the episode (done) after this many steps; None (default): it never ends.
        """
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer or null, got {max_steps!r}")
        await self._drop_sandbox()
        self._episode_id = episode_id or str(uuid.uuid4())
        self._seed = seed
        self._steps = 0
        self._max_steps = max_steps
        self._last = None
        self._sandbox = Sandbox(self.settings, hash_seed=seed)
        return CodeObservation()

    async def step_async(self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any) -> CodeObservation:
        if self._sandbox is None:  # a step before any reset starts an episode
            self._sandbox = Sandbox(self.settings, hash_seed=self._seed)
        limit = self.settings.timeout_s if timeout_s is None else min(self.settings.timeout_s, timeout_s)
        result = await self._sandbox.run(action.code, persist=action.persist, timeout_s=limit)
        self._steps += 1
        self._last = (action.code, result)
        return CodeObservation(
            stdout=result.stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            truncated=result.truncated,
            duration_s=round(result.duration_s, 4),
            interpreter_restarted=result.restarted,
            reward=_reward(action.code, result),
            done=self._max_steps is not None and self._steps >= self._max_steps,
        )

    def render(self) -> str:
        """The last run as a terminal: the code, its output, errors in red and how it ended."""
        if self._last is None:
            return "\x1b[2m# no code run yet: send Python code as a step\x1b[0m"
        code, result = self._last
        lines = [f"\x1b[1;36m>>>\x1b[0m {line}" for line in code.splitlines() or [""]]
        if result.stdout:
            lines.append(result.stdout.rstrip("\n"))
        if result.stderr:
            lines.append(f"\x1b[31m{result.stderr.rstrip()}\x1b[0m")
        if result.timed_out:
            ending = "\x1b[1;31mtimed out\x1b[0m"
        elif result.exit_code == 0:
            ending = "\x1b[32mexit 0\x1b[0m"
        else:
            ending = f"\x1b[1;31mexit {result.exit_code}\x1b[0m"
        lines.append(f"{ending} \x1b[2min {result.duration_s:.2f} s\x1b[0m")
        return "\n".join(lines)

    @property
    def state(self) -> CodingState:
        layers = (
            self._sandbox.layers
            if self._sandbox is not None and self._sandbox.layers
            else isolation_report(self.settings)
        )
        return CodingState(
            episode_id=self._episode_id,
            step_count=self._steps,
            timeout_s=self.settings.timeout_s,
            memory_mb=self.settings.memory_mb,
            isolation=layers,
        )

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    async def _drop_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await asyncio.to_thread(sandbox.close)  # deleting a big folder must not stall the loop


def _reward(code: str, result: CellResult) -> float:
    if result.timed_out:
        return -1.0
    if not code.strip():
        return 0.0
    return 1.0 if result.exit_code == 0 else 0.0
