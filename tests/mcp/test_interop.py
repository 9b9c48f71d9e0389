"""MCP interop with upstream openenv-core 0.3.0, both ways: upstream's MCPToolClient against our
echo_env, and our client against an upstream MCPEnvironment (FastMCP tools)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv import (
    CallToolAction,
    CallToolObservation,
    GenericEnvClient,
    ListToolsAction,
    ListToolsObservation,
    ToolCallError,
)
from tests.support.servers import ROOT, ProcessServer

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent / "upstream"


def test_upstream_mcp_client_drives_our_server(upstream_python: str, echo_url: str) -> None:
    out = subprocess.run(
        [upstream_python, str(HERE / "mcp_client_driver.py"), echo_url], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert [t["name"] for t in seen["tools"]] == ["echo_message", "echo_with_length"]
    assert seen["tools"][0]["input_schema"]["required"] == ["message"]
    assert seen["tools"][0]["description"] == "Echo back the provided message."
    assert seen["echo_message"] == "Hello, World!"
    assert seen["echo_with_length"] == {"message": "abc", "length": 3}
    assert seen["step"] == {"type": "CallToolObservation", "result": "hi", "reward": pytest.approx(0.2)}
    assert seen["step_list"] == ["echo_message", "echo_with_length"]
    assert "(type: tool_not_found)" in seen["unknown_tool"]
    assert "(type: invalid_args)" in seen["bad_args"] and "unknown argument 'msg'" in seen["bad_args"]
    assert seen["bad_step_error"]["error_type"] == "invalid_args"
    assert seen["prod_tools"] == ["echo_message", "echo_with_length"]
    assert seen["prod_call"] == {"message": "prod", "length": 4}
    assert seen["prod_session"] is True and seen["prod_closed"] is True
    assert "Unknown tool: 'nope'" in seen["prod_unknown"]


@pytest.fixture(scope="module")
def upstream_mcp_url(upstream_python: str) -> Iterator[str]:
    server = ProcessServer([upstream_python, "-m", "uvicorn", "mcp_env_server:app", "--log-level", "warning"], cwd=HERE)
    try:
        server.wait(timeout=90)
        yield server.url
    except Exception:
        print(server.log())
        raise
    finally:
        server.stop()


async def test_our_client_drives_an_upstream_mcp_env(upstream_mcp_url: str) -> None:
    async with GenericEnvClient(upstream_mcp_url) as env:
        await env.reset()
        tools = await env.list_tools()
        assert [t.name for t in tools] == ["add", "describe", "boom"]
        assert tools[0].description == "Add two integers."
        assert tools[0].input_schema["properties"]["a"] == {"type": "integer", "description": "The first addend."}
        assert await env.call_tool("add", a=1) == 3
        assert await env.call_tool("describe", name="bob") == {"name": "bob", "length": 3}
        failures = {}
        for name, args in [("boom", {"reason": "r"}), ("nope", {}), ("add", {"a": "x"})]:
            with pytest.raises(ToolCallError) as err:
                await env.call_tool(name, **args)
            failures[name] = err.value.error_type
        assert failures == {"boom": "execution_error", "nope": "tool_not_found", "add": "invalid_args"}

        listed = await env.step(ListToolsAction())
        assert isinstance(listed.observation, ListToolsObservation)
        assert [t.name for t in listed.observation.tools] == ["add", "describe", "boom"]
        called = await env.step(CallToolAction(tool_name="add", arguments={"a": 5}))
        assert isinstance(called.observation, CallToolObservation)
        assert called.observation.error is None and called.observation.result["data"] == 7
        failed = await env.step(CallToolAction(tool_name="boom", arguments={"reason": "r"}))
        assert failed.observation.error is not None and failed.observation.error.error_type.value == "execution_error"


def test_our_client_on_an_upstream_env_without_tools(upstream_python: str) -> None:
    server = ProcessServer(
        [upstream_python, "-m", "uvicorn", "count_server:app", "--log-level", "warning"],
        cwd=ROOT / "tests" / "support" / "upstream",
    )
    try:
        url = server.wait(timeout=90)
        with GenericEnvClient(url).sync() as env:
            with pytest.raises(ToolCallError, match="does not support MCP") as err:
                env.list_tools()
            assert err.value.tool_name is None
            env.reset()  # the session is fine
            assert env.step({"message": "still here"}).observation["echoed"] == "still here"
    finally:
        server.stop()
