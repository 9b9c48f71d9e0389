"""envs/echo_env: its rules, and that it runs the way a Space runs it."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest
from echo_env import EchoAction, EchoEnv, EchoObservation, EchoState

from tests.support.servers import ROOT, ProcessServer


async def test_echo_rules(echo_url: str) -> None:
    async with EchoEnv(echo_url) as env:
        first = await env.reset()
        assert first.observation == EchoObservation(
            echoed_message="Echo environment ready!", message_length=0, reward=0.0
        )
        for message in ("a", "hello", "", "ünïcödé ✓"):
            result = await env.step(EchoAction(message=message))
            assert result.observation.echoed_message == message
            assert result.observation.message_length == len(message)
            assert result.reward == pytest.approx(0.1 * len(message))
            assert result.done is False
        state = await env.state()
        assert isinstance(state, EchoState)
        assert state.step_count == 4 and state.total_length == 1 + 5 + 0 + len("ünïcödé ✓")
        again = await env.reset(episode_id="second")
        assert again.observation.message_length == 0
        assert (await env.state()).model_dump() == {"episode_id": "second", "step_count": 0, "total_length": 0}


def test_runs_with_plain_uvicorn_from_its_folder() -> None:
    server = ProcessServer([sys.executable, "-m", "uvicorn", "server.app:app"], cwd=ROOT / "envs" / "echo_env")
    try:
        url = server.wait()
        assert httpx.get(f"{url}/metadata").json()["name"] == "echo_env"

        async def episode() -> float | None:
            async with EchoEnv(url) as env:
                await env.reset()
                return (await env.step(EchoAction(message="uvicorn"))).reward

        assert asyncio.run(episode()) == pytest.approx(0.7)
    finally:
        server.stop()


def test_space_files_are_in_place() -> None:
    env = ROOT / "envs" / "echo_env"
    manifest = (env / "openenv.yaml").read_text()
    assert "app: server.app:app" in manifest and "name: echo_env" in manifest
    readme = (env / "README.md").read_text()
    front = readme.split("---")[1]
    assert "sdk: docker" in front and "app_port: 8000" in front and "- openenv" in front
    assert "ARG BASE_IMAGE=python:3.11-slim" in (env / "Dockerfile").read_text()


async def test_render_and_max_steps(echo_url: str) -> None:
    async with EchoEnv(echo_url) as env:
        await env.reset(max_steps=2)
        assert (await env.render()).text() == "echo #0: Echo environment ready!"  # type: ignore[union-attr]
        assert (await env.step(EchoAction(message="hi"))).done is False
        assert (await env.render()).text() == "echo #1: hi"  # type: ignore[union-attr]
        assert (await env.step(EchoAction(message="bye"))).done is True
