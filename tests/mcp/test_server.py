"""MCP on a real server: JSON-RPC on POST /mcp and the WS `mcp` frame, the step actions, and
the client's list_tools / call_tool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from openenv import (
    CallToolAction,
    CallToolObservation,
    ConfigurationError,
    EnvClient,
    GenericEnvClient,
    ListToolsAction,
    ListToolsObservation,
    ServerSettings,
    State,
    ToolCallError,
    ToolErrorType,
    create_app,
    tool,
)
from tests.mcp.tool_envs import NoteAction, NoteObservation, PlainEnv, ToolEnv
from tests.support.servers import serve_app

ToolClient = EnvClient[NoteAction, NoteObservation, State]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = create_app(ToolEnv, NoteAction, NoteObservation, settings=ServerSettings(max_sessions=8, tool_timeout_s=5))
    with serve_app(app) as base:
        yield base


@pytest.fixture(scope="module")
def plain_url() -> Iterator[str]:
    with serve_app(create_app(PlainEnv, NoteAction, NoteObservation, settings=ServerSettings(max_sessions=1))) as base:
        yield base


def rpc(url: str, method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        body["params"] = params
    reply = httpx.post(url + "/mcp", json=body, timeout=30)
    assert reply.status_code == 200
    return reply.json()


# -- POST /mcp -------------------------------------------------------------------------------------


def test_tools_list_over_http(url: str) -> None:
    reply = rpc(url, "tools/list", rid="a")
    assert reply["id"] == "a" and "error" not in reply
    tools = {t["name"]: t for t in reply["result"]["tools"]}
    assert set(tools) == {
        "add",
        "note",
        "norm",
        "boom",
        "wait_sync",
        "wait_async",
        "blocking",
        "raw",
        "fails_with_timeout",
        "array",
    }
    assert tools["add"]["description"] == "Add two integers."
    assert tools["add"]["inputSchema"]["required"] == ["a"]


def test_tools_call_over_http(url: str) -> None:
    reply = rpc(url, "tools/call", {"name": "add", "arguments": {"a": 40}}, rid=7)
    assert reply["id"] == 7
    assert reply["result"] == {
        "content": [{"type": "text", "text": "42"}],
        "structuredContent": {"result": 42},
        "isError": False,
        "data": 42,
    }
    model = rpc(url, "tools/call", {"name": "norm", "arguments": {"p": {"x": 1, "y": 2}}})["result"]
    assert model["data"] == model["structuredContent"] == {"x": -1, "y": -2}
    assert json.loads(model["content"][0]["text"]) == {"x": -1, "y": -2}
    assert rpc(url, "tools/call", {"name": "array"})["result"]["data"] == [[1, 2], [3, 4]]


@pytest.mark.parametrize(
    ("params", "code", "error_type", "text"),
    [
        (
            {"name": "nope"},
            -32602,
            "tool_not_found",
            "Unknown tool: 'nope'; available tools: add, array, blocking, boom",
        ),
        ({"name": "add", "arguments": {"a": "x"}}, -32602, "invalid_args", "a: Input should be a valid integer"),
        ({"name": "add", "arguments": {"b": 1}}, -32602, "invalid_args", "a: Field required"),
        ({"name": "boom", "arguments": {"reason": "bad day"}}, -32000, "execution_error", "ValueError: bad day"),
        ({"name": "wait_async"}, -32001, "timeout", "timed out after 0.3 seconds"),
        ({"name": "raw"}, -32000, "execution_error", "cannot be sent as JSON"),
        ({"name": "fails_with_timeout"}, -32000, "execution_error", "TimeoutError: upstream service took too long"),
    ],
)
def test_tool_failures_are_structured(url: str, params: dict[str, Any], code: int, error_type: str, text: str) -> None:
    error = rpc(url, "tools/call", params)["error"]
    assert error["code"] == code
    assert text in error["message"]
    assert error["data"] == {"error_type": error_type, "message": error["message"], "tool_name": params["name"]}


@pytest.mark.parametrize(
    ("body", "code", "text"),
    [
        (b"not json", -32700, "Parse error"),
        (b"[1, 2]", -32600, "a JSON-RPC request is an object"),
        (b'{"method": "tools/list", "id": 1}', -32600, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600, '"method" must be a string'),
        (b'{"jsonrpc": "2.0", "method": "tools/list", "params": [1], "id": 1}', -32602, "Params must be an object"),
        (b'{"jsonrpc": "2.0", "method": "resources/list", "id": 1}', -32601, "Method not found: resources/list"),
        (b'{"jsonrpc": "2.0", "method": "tools/call", "params": {}, "id": 1}', -32602, "Missing 'name'"),
        (b'{"jsonrpc": "2.0", "method": "tools/list", "id": [1]}', -32600, "id must be"),
    ],
)
def test_bad_requests_get_json_rpc_errors(url: str, body: bytes, code: int, text: str) -> None:
    reply = httpx.post(url + "/mcp", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 200
    assert reply.json()["error"]["code"] == code
    assert text in reply.json()["error"]["message"]
    assert rpc(url, "tools/list")["result"]["tools"]  # still serving


def test_http_sessions_keep_state_across_requests(url: str) -> None:
    sid = rpc(url, "openenv/session/create")["result"]["session_id"]
    first = rpc(url, "tools/call", {"name": "note", "arguments": {"text": "a"}, "session_id": sid})["result"]["data"]
    second = rpc(url, "tools/call", {"name": "note", "arguments": {"text": "b", "tag": "done"}, "session_id": sid})
    assert first == {"count": 1, "notes": ["todo:a"]}
    assert second["result"]["data"] == {"count": 2, "notes": ["todo:a", "done:b"]}
    # Without a session id every request gets a fresh environment.
    assert rpc(url, "tools/call", {"name": "note", "arguments": {"text": "c"}})["result"]["data"]["count"] == 1
    assert rpc(url, "openenv/session/close", {"session_id": sid})["result"] == {"session_id": sid, "closed": True}
    gone = rpc(url, "tools/call", {"name": "note", "arguments": {"text": "d"}, "session_id": sid})["error"]
    assert gone["code"] == -32602 and "Unknown session_id" in gone["message"]
    assert "'session_id' is required" in rpc(url, "openenv/session/close", {})["error"]["message"]


def test_http_sessions_count_against_capacity(plain_url: str) -> None:
    sid = rpc(plain_url, "openenv/session/create")["result"]["session_id"]
    try:
        full = rpc(plain_url, "openenv/session/create")["error"]
        assert full["code"] == -32000 and full["data"] == {"active_sessions": 1, "max_sessions": 1}
    finally:
        rpc(plain_url, "openenv/session/close", {"session_id": sid})
    again = rpc(plain_url, "openenv/session/create")["result"]["session_id"]
    rpc(plain_url, "openenv/session/close", {"session_id": again})


def test_env_without_tools(plain_url: str) -> None:
    assert rpc(plain_url, "tools/list")["result"] == {"tools": []}
    error = rpc(plain_url, "tools/call", {"name": "x"})["error"]
    assert error["data"]["error_type"] == "tool_not_found" and "this environment exposes no tools" in error["message"]


def test_http_step_accepts_tool_actions(url: str) -> None:
    ok = httpx.post(
        url + "/step", json={"action": {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1}}}
    ).json()
    assert ok == {"observation": {"tool_name": "add", "result": 3, "error": None}, "reward": 0.5, "done": False}
    listed = httpx.post(url + "/step", json={"action": {"type": "list_tools"}}).json()
    assert [t["name"] for t in listed["observation"]["tools"]][:2] == ["add", "note"]
    bad = httpx.post(url + "/step", json={"action": {"type": "call_tool"}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "action", "tool_name"]
    # The env's own action still validates against its class, with pydantic's usual detail.
    wrong = httpx.post(url + "/step", json={"action": {"txt": "x"}})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "action", "text"]


# -- WebSocket --------------------------------------------------------------------------------------


def test_ws_mcp_frames(url: str) -> None:
    ws_url = url.replace("http://", "ws://") + "/ws"
    with connect(ws_url) as ws:

        def send(frame: Any) -> dict[str, Any]:
            ws.send(json.dumps(frame))
            return json.loads(ws.recv())

        listed = send({"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}})
        assert listed["type"] == "mcp" and listed["data"]["id"] == 1 and len(listed["data"]["result"]["tools"]) == 10
        called = send(
            {
                "type": "mcp",
                "data": {
                    "jsonrpc": "2.0",
                    "method": "tools/call",
                    "id": 2,
                    "params": {"name": "note", "arguments": {"text": "ws"}},
                },
            }
        )
        assert called["data"]["result"]["data"] == {"count": 1, "notes": ["todo:ws"]}
        # The WS session's environment is the one tool calls change.
        step = send({"type": "step", "data": {"text": "step"}})
        assert step["data"]["observation"]["notes"] == ["todo:ws", "step"]
        bad = send({"type": "mcp", "data": {"method": "tools/list"}})
        assert bad["type"] == "mcp" and bad["data"]["error"]["code"] == -32600
        not_object = send({"type": "mcp", "data": [1]})
        assert not_object["type"] == "error" and not_object["data"]["code"] == "VALIDATION_ERROR"
        own = send({"type": "mcp", "data": {"jsonrpc": "2.0", "method": "openenv/session/create", "id": 3}})
        sid = own["data"]["result"]["session_id"]
        refused = send(
            {
                "type": "mcp",
                "data": {"jsonrpc": "2.0", "method": "openenv/session/close", "id": 4, "params": {"session_id": sid}},
            }
        )
        assert refused["data"]["error"]["code"] == -32600
        assert send({"type": "state"})["data"]["step_count"] == 1


async def test_client_list_and_call_tools(url: str) -> None:
    async with ToolClient(url) as env:
        tools = await env.list_tools()
        assert [t.name for t in tools][:3] == ["add", "note", "norm"]
        assert tools[0].input_schema["properties"]["a"]["type"] == "integer"
        assert await env.call_tool("add", a=1, b=1) == 2
        assert await env.call_tool("note", text="x") == {"count": 1, "notes": ["todo:x"]}
        assert await env.call_tool("norm", p={"x": 3}) == {"x": -3, "y": 0}
        with pytest.raises(ToolCallError) as err:
            await env.call_tool("boom", reason="no")
        assert err.value.error_type == "execution_error" and err.value.tool_name == "boom"
        assert "ValueError: no" in str(err.value)
        with pytest.raises(ToolCallError) as err:
            await env.call_tool("missing")
        assert err.value.error_type == "tool_not_found"
        with pytest.raises(ToolCallError) as err:
            await env.call_tool("wait_sync")
        assert err.value.error_type == "timeout"
        # A tool call over JSON-RPC is not a step.
        assert (await env.state()).step_count == 0
        assert await env.call_tool("add", a=2) == 4  # the session outlives every failure


async def test_step_actions_return_tool_observations(url: str) -> None:
    async with ToolClient(url) as env:
        await env.reset()
        listed = await env.step(ListToolsAction())
        assert isinstance(listed.observation, ListToolsObservation)
        assert listed.observation.tools[0].name == "add"
        called = await env.step(CallToolAction(tool_name="note", arguments={"text": "t"}))
        assert isinstance(called.observation, CallToolObservation)
        assert called.observation.result == {"count": 1, "notes": ["todo:t"]} and called.reward == 0.5
        failed = await env.step(CallToolAction(tool_name="note", arguments={"text": ""}))
        assert failed.observation.error is not None
        assert failed.observation.error.error_type is ToolErrorType.INVALID_ARGS and failed.reward == -1.0
        timed = await env.step(CallToolAction(tool_name="blocking", arguments={"seconds": 2}), timeout_s=0.2)
        assert timed.observation.error.error_type is ToolErrorType.TIMEOUT
        assert "0.2 seconds" in timed.observation.error.message
        plain = await env.step(NoteAction(text="after"))
        assert plain.observation.notes == ["todo:t", "after"]
    async with GenericEnvClient(url) as env:
        raw = await env.step({"type": "call_tool", "tool_name": "add", "arguments": {"a": 5}})
        assert isinstance(raw.observation, dict) and raw.observation["result"] == 7


async def test_sync_tools_never_hold_the_event_loop(url: str) -> None:
    async with ToolClient(url) as slow, ToolClient(url) as other:
        pending = asyncio.ensure_future(slow.call_tool("blocking", seconds=2.0))
        await asyncio.sleep(0.05)  # the tool call has reached the server
        await other.reset()
        result = await other.step(NoteAction(text="meanwhile"))
        assert result.observation.notes == ["meanwhile"]
        assert not pending.done(), "another session was served only after the blocking tool returned"
        assert await pending == "done"


def test_sync_client_inherits_tools(url: str) -> None:
    with ToolClient(url).sync() as env:
        assert "add" in [t.name for t in env.list_tools()]
        assert env.call_tool("add", a=3) == 5
        with pytest.raises(ToolCallError):
            env.call_tool("add")


class BrokenToolEnv(PlainEnv):
    @tool
    def lookup(self, key: UndefinedType) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "never"


def test_a_broken_tool_declaration_fails_at_start_up() -> None:
    with pytest.raises(ConfigurationError, match="cannot resolve the type hints of tool 'lookup'"):
        create_app(BrokenToolEnv, NoteAction, NoteObservation)


def test_a_broken_tool_behind_a_factory_is_reported_not_crashed() -> None:
    def factory() -> Any:  # no return annotation: create_app cannot check the class up front
        return BrokenToolEnv()

    with serve_app(create_app(factory, NoteAction, NoteObservation)) as base:
        listing = rpc(base, "tools/list")["error"]
        assert listing["code"] == -32603 and "cannot resolve the type hints" in listing["message"]
        call = rpc(base, "tools/call", {"name": "lookup", "arguments": {"key": "k"}})["error"]
        assert call["data"]["error_type"] == "execution_error"
        assert rpc(base, "tools/list", rid=9)["id"] == 9  # still serving
