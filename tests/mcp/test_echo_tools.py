"""envs/echo_env offers upstream's quick-start tools and keeps its own action and observation."""

from __future__ import annotations

import pytest
from echo_env import CallToolAction, CallToolObservation, EchoAction, EchoEnv, EchoObservation, ListToolsAction

from tests.support.servers import ProcessServer


async def test_quick_start_episode(echo_url: str) -> None:
    async with EchoEnv(base_url=echo_url) as client:
        result = await client.reset()
        assert result.observation.echoed_message == "Echo environment ready!"
        result = await client.step(CallToolAction(tool_name="echo_message", arguments={"message": "Hello, World!"}))
        assert isinstance(result.observation, CallToolObservation)
        assert result.observation.result == "Hello, World!"
        assert result.reward == pytest.approx(1.3)
        # The env's own action and observation are unchanged.
        result = await client.step(EchoAction(message="hi"))
        assert isinstance(result.observation, EchoObservation)
        assert result.observation.echoed_message == "hi" and result.reward == pytest.approx(0.2)
        state = await client.state()
        assert state.step_count == 2 and state.total_length == 15
        # JSON-RPC tool calls are not steps.
        assert await client.call_tool("echo_with_length", message="abcd") == {"message": "abcd", "length": 4}
        assert (await client.state()).step_count == 2


def test_quick_start_sync_against_a_served_process(echo_process: ProcessServer) -> None:
    with EchoEnv(base_url=echo_process.url).sync() as client:
        client.reset()
        listed = client.step(ListToolsAction())
        assert [t.name for t in listed.observation.tools] == ["echo_message", "echo_with_length"]
        result = client.step(CallToolAction(tool_name="echo_message", arguments={"message": "Hello, World!"}))
        assert result.observation.result == "Hello, World!"
        failed = client.step(CallToolAction(tool_name="echo_message", arguments={"message": 5}))
        assert failed.observation.error is not None and failed.reward == 0.0
        assert client.call_tool("echo_message", message="sync") == "sync"
