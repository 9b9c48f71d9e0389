"""Run by upstream openenv-core's Python (never by ours): drive a server with upstream's own
MCPToolClient and print what it saw as one JSON line.  Usage: python mcp_client_driver.py URL"""

import asyncio
import json
import sys

from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ListToolsAction
from openenv.core.mcp_client import MCPToolClient


async def failure(coro):
    try:
        await coro
    except RuntimeError as exc:
        return str(exc)
    return None


async def main(url):
    out = {}
    async with MCPToolClient(base_url=url) as env:
        await env.reset()
        tools = await env.list_tools()
        out["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
        out["echo_message"] = await env.call_tool("echo_message", message="Hello, World!")
        out["echo_with_length"] = await env.call_tool("echo_with_length", message="abc")
        step = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": "hi"}))
        out["step"] = {
            "type": type(step.observation).__name__,
            "result": step.observation.result,
            "reward": step.reward,
        }
        listed = await env.step(ListToolsAction())
        out["step_list"] = [t.name for t in listed.observation.tools]
        out["unknown_tool"] = await failure(env.call_tool("nope"))
        out["bad_args"] = await failure(env.call_tool("echo_message", msg="x"))
        bad = await env.step(CallToolAction(tool_name="echo_message", arguments={}))
        assert isinstance(bad.observation, CallToolObservation)
        out["bad_step_error"] = bad.observation.error.model_dump(mode="json")
        out["state_step_count"] = (await env.state()).step_count
    # Upstream's "production mode": JSON-RPC on POST /mcp with an HTTP session.
    prod = MCPToolClient(base_url=url)
    prod.use_production_mode = True
    try:
        out["prod_tools"] = [t.name for t in await prod.list_tools()]
        out["prod_call"] = await prod.call_tool("echo_with_length", message="prod")
        out["prod_session"] = prod._production_session_id is not None
        out["prod_unknown"] = await failure(prod.call_tool("nope"))
    finally:
        await prod.close()
    out["prod_closed"] = prod._production_session_id is None
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
