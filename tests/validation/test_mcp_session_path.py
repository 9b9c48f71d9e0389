"""An MCP env is judged by the way its users' client reaches it (openenv/validation/paths.py).

tests/fixtures/upstream/mcp_echo_env, served by upstream's SDK in its own venv, answers the MCP
session path upstream 0.10.0's MCPToolClient takes (`POST /mcp openenv/session/create`,
`/ws?session_id=`, tools over `POST /mcp`) at once, and never answers a tool call sent as a `step`
frame on a plain `/ws` session (until upstream's 30 s tool-call timeout). Upstream's own clients
show that shape; the episode that judges it goes the MCP session path, plays the plain one too,
and does not count the plain one's silence. On an upstream server older than the session path's
WebSocket half (openenv-core 0.3.0), the plain path still decides.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openenv import GenericEnvClient
from openenv.errors import CapacityReachedError
from openenv.validation import validate_url
from openenv.validation.episode import StepRecord, play_episode
from openenv.validation.mcp_session import McpSessionClient
from openenv.validation.paths import MCP_SESSION_PATH, PLAIN_PATH, play_paths
from tests.support.servers import ROOT, ProcessServer

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SHAPES = ROOT / "tests" / "fixtures" / "upstream"
STEP_S = 3.0  # the clients' reply limit here: the plain path's tool call never answers within it


def _serve(python: str, shape: str) -> Iterator[str]:
    server = ProcessServer(
        [python, "-m", "uvicorn", "server.app:app"],
        cwd=SHAPES / shape,
        env={"PYTHONPATH": str(SHAPES), "ENABLE_WEB_INTERFACE": "true" if shape == "mcp_echo_env" else "false"},
    )
    try:
        yield server.wait(timeout=400)  # upstream's SDK (gradio with the web interface) imports slowly
    finally:
        server.stop()


@pytest.fixture(scope="module")
def echo_url(upstream010_python: str) -> Iterator[str]:
    yield from _serve(upstream010_python, "mcp_echo_env")


@pytest.fixture(scope="module")
def old_tools_url(upstream_python: str) -> Iterator[str]:
    yield from _serve(upstream_python, "tools_env")


def _released(url: str, limit_s: float = 45.0) -> None:
    """Wait until the server makes a session again (a plain tool call holds its place ~30 s)."""

    async def wait() -> None:
        ends = time.monotonic() + limit_s
        client = McpSessionClient(url, message_timeout_s=STEP_S)
        while True:
            try:
                await client.open()
            except CapacityReachedError:
                assert time.monotonic() < ends, f"the server held the session's place for over {limit_s:g}s"
                await asyncio.sleep(0.5)
                continue
            await client.close()
            return

    asyncio.run(wait())


# Upstream 0.10.0's clients, in its venv: its MCP tool client, then its generic client on plain /ws.
_UPSTREAM_CLIENTS = """
import asyncio, json, sys, time
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient

async def main(url, step_s):
    out = {}
    async with MCPToolClient(base_url=url, message_timeout_s=step_s) as env:
        await env.reset()
        out["tools"] = sorted(t.name for t in await env.list_tools())
        t0 = time.perf_counter()
        out["echoed"] = await env.call_tool("echo_message", message="hello")
        out["call_s"] = time.perf_counter() - t0
    plain = GenericEnvClient(base_url=url, message_timeout_s=step_s)
    try:
        await plain.reset()
        await plain.step({"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hello"}})
        out["plain"] = "answered"
    except Exception as exc:
        out["plain"] = type(exc).__name__
    finally:
        await plain.close()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


def test_upstreams_own_clients_show_the_shape(upstream010_python: str, echo_url: str) -> None:
    out = subprocess.run(
        [upstream010_python, "-c", _UPSTREAM_CLIENTS, echo_url, str(STEP_S)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.environ.get("TMPDIR", "/tmp"),  # never this checkout, whose `openenv` package would shadow theirs
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["tools"] == ["echo_message", "echo_with_length"] and seen["echoed"] == "hello", seen
    assert seen["call_s"] < 2.0, seen
    assert seen["plain"] == "TimeoutError", seen  # upstream's generic client on plain /ws gets no reply either
    _released(echo_url)


def test_the_mcp_session_path_decides_and_the_plain_paths_silence_is_noted(echo_url: str) -> None:
    records: list[tuple[str, StepRecord]] = []
    notes: list[str] = []

    async def play() -> Any:
        client = GenericEnvClient(echo_url, message_timeout_s=STEP_S, connect_timeout_s=STEP_S)
        path = ["?"]

        def note(line: str) -> None:
            notes.append(line)
            path[0] = PLAIN_PATH if line.startswith("plain /ws path (") else path[0]
            path[0] = MCP_SESSION_PATH if line.startswith("MCP session path (") else path[0]

        try:
            return await play_paths(
                client,
                await _action_schema(echo_url),
                3,
                on_record=lambda r: records.append((path[0], r)),
                on_note=note,
            )
        finally:
            await client.close()

    episode = asyncio.run(play())
    assert (episode.path, episode.verdict.code) == (MCP_SESSION_PATH, "PASSED"), (episode.verdict, notes)
    by_mcp = [r for p, r in records if p == MCP_SESSION_PATH]
    assert [r.request for r in by_mcp] == ["reset", "tools/list", "step", "step", "step", "state"]
    assert all(r.outcome == "ok" for r in by_mcp), by_mcp
    assert '"text": "hello"' in by_mcp[2].got and '"tool_name": "echo_message"' in by_mcp[2].sent
    # The plain path, played after it, is what the smoke stage alone played before: the listing
    # answers, the first tool call does not. Noted, not counted; the place it held is waited for.
    by_plain = [r for p, r in records if p == PLAIN_PATH]
    assert [(r.request, r.outcome) for r in by_plain] == [("reset", "ok"), ("tools/list", "ok"), ("step", "died")]
    assert by_plain[2].code == "EnvTimeoutError" and "no reply" in by_plain[2].got
    assert any("not counted" in n and "SESSION_DIED" in n for n in notes), notes
    assert any(n.startswith("the server released the unanswered plain session's place after") for n in notes), notes


def test_validate_url_passes_it_by_the_mcp_session_path(echo_url: str) -> None:
    _released(echo_url)
    report = validate_url(echo_url, timeout_s=STEP_S, latency_steps=3)
    assert report.exit_code == 0, [(c.id, c.message) for c in report.problems()]
    step = report.results("runtime.step")[0]
    assert step.details["path"] == MCP_SESSION_PATH and step.details["tools"] == ["echo_message", "echo_with_length"]
    assert report.results("runtime.latency")[0].status == "pass"


def test_the_plain_episode_alone_fails_it(echo_url: str) -> None:
    """The plain episode alone (all the smoke stage played before) fails the same server."""
    _released(echo_url)

    async def plain() -> Any:
        client = GenericEnvClient(echo_url, message_timeout_s=STEP_S, connect_timeout_s=STEP_S)
        try:
            return await play_episode(client, await _action_schema(echo_url), 3, seed=0)
        finally:
            await client.close()

    episode = asyncio.run(plain())
    assert episode.verdict.code == "SESSION_DIED" and "no reply" in episode.verdict.reason, episode.verdict
    _released(echo_url)


def test_an_older_upstream_server_is_played_on_the_plain_path(old_tools_url: str) -> None:
    """openenv-core 0.3.0 makes MCP sessions over POST /mcp but does not attach /ws?session_id= to
    them (its WebSocket opens a session of its own, past its one place): the plain path decides."""
    notes: list[str] = []

    async def play() -> Any:
        client = GenericEnvClient(old_tools_url, message_timeout_s=10.0)
        try:
            return await play_paths(client, await _action_schema(old_tools_url), 3, on_note=notes.append)
        finally:
            await client.close()

    episode = asyncio.run(play())
    assert (episode.path, episode.verdict.code) == (PLAIN_PATH, "PASSED"), (episode.verdict, notes)
    assert any("the plain /ws path decides" in n for n in notes), notes


async def _action_schema(url: str) -> dict[str, Any]:
    import urllib.request

    def get() -> dict[str, Any]:
        with urllib.request.urlopen(url + "/schema", timeout=10) as reply:
            return json.loads(reply.read())["action"]

    return await asyncio.to_thread(get)
