"""The echo environment: each step echoes the message back, with reward 0.1 × its length.

It also offers two MCP tools, `echo_message` and `echo_with_length`, as upstream's echo env does:
call them with `step(CallToolAction(tool_name="echo_message", arguments={"message": "hi"}))`
(which earns the same reward as an `EchoAction`) or with the client's `call_tool(...)`.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv import CallToolAction, CallToolObservation, Environment, tool

try:
    from ..models import EchoAction, EchoObservation, EchoState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import EchoAction, EchoObservation, EchoState  # type: ignore[no-redef]

READY = "Echo environment ready!"


# The longest message that earns reward: 0.1 a character, so a step's reward is at most 100
# (openenv.yaml's declared range). A longer message is echoed whole and earns nothing: flooding the
# env is not the way to its top reward.
REWARDED_CHARS = 1000


def reward_for(length: int) -> float:
    """A step's reward for a message of `length` characters: 0.1 each, 0 past REWARDED_CHARS."""
    return 0.1 * length if length <= REWARDED_CHARS else 0.0


class EchoEnvironment(Environment[EchoAction, EchoObservation, EchoState]):
    """Echoes each message back; reward is 0.1 per character."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Its whole state is plain data: snapshot() / restore() (the "fork" extension) copy these.
    SNAPSHOT_ATTRS = ("_episode_id", "_steps", "_total_length", "_last", "_max_steps")

    def __init__(self) -> None:
        self._episode_id = str(uuid.uuid4())
        self._steps = 0
        self._total_length = 0
        self._last = READY
        self._max_steps: int | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, max_steps: int | None = None, **kwargs: Any
    ) -> EchoObservation:
        """Start an episode; `max_steps` ends it (done) after that many steps (None: never)."""
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer or null, got {max_steps!r}")
        self._max_steps = max_steps
        self._episode_id = episode_id or str(uuid.uuid4())
        self._steps = 0
        self._total_length = 0
        self._last = READY
        return EchoObservation(echoed_message=READY, message_length=0, reward=0.0)

    def render(self) -> str:
        """The last message echoed, as plain text."""
        return f"echo #{self._steps}: {self._last}"

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        self._last = action.message
        length = len(action.message)
        self._steps += 1
        self._total_length += length
        done = self._max_steps is not None and self._steps >= self._max_steps
        return EchoObservation(
            echoed_message=action.message, message_length=length, reward=reward_for(length), done=done
        )

    @tool
    def echo_message(self, message: str) -> str:
        """Echo back the provided message.

        Args:
            message: The message to echo back.
        """
        return message

    @tool
    def echo_with_length(self, message: str) -> dict[str, Any]:
        """Echo back the provided message with its length in characters.

        Args:
            message: The message to echo back.
        """
        return {"message": message, "length": len(message)}

    def after_tool_call(self, action: CallToolAction, observation: CallToolObservation) -> CallToolObservation:
        # A tool call sent as a step counts as a step and is rewarded like an EchoAction: 0.1 per
        # character echoed, nothing past REWARDED_CHARS. (Calls over JSON-RPC are not steps and do not come here.)
        message = action.arguments.get("message")
        length = len(message) if observation.error is None and isinstance(message, str) else 0
        self._steps += 1
        self._total_length += length
        observation.reward = reward_for(length)
        return observation

    @property
    def state(self) -> EchoState:
        return EchoState(episode_id=self._episode_id, step_count=self._steps, total_length=self._total_length)
