from __future__ import annotations

from echo_env import EchoAction, EchoEnv


async def test_echo_round_trip(echo_url: str) -> None:
    async with EchoEnv(echo_url) as env:
        first = await env.reset()
        assert first.observation.echoed_message == "Echo environment ready!"
        result = await env.step(EchoAction(message="hello"))
        assert result.observation.echoed_message == "hello"
        assert result.reward == 0.5
        state = await env.state()
        assert state.step_count == 1 and state.total_length == 5
