"""Drive one of our servers with upstream openenv 0.10.0's own clients; print one JSON report.

Run with the 0.10.0 venv's Python: `python driver_010.py URL one|many` (the server allows one
session, or several). The MCP tool client makes an HTTP session (POST /mcp) and attaches its
WebSocket to it (/ws?session_id=...).
"""

import asyncio
import json
import sys

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoClient(EnvClient):
    """A typed client written the way 0.10.0's template writes one."""

    def _step_payload(self, action):
        return action.model_dump()

    def _parse_result(self, payload):
        obs = EchoObservation(**payload["observation"], reward=payload.get("reward"), done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload):
        return payload


async def main(url: str, capacity: str) -> None:
    report: dict = {}
    async with MCPToolClient(base_url=url) as env:
        reset = await env.reset()
        report["reset"] = reset.observation.model_dump()
        report["tools"] = sorted(t.name for t in await env.list_tools())
        report["call"] = await env.call_tool("echo_message", message="through the attached session")
        report["call_dict"] = await env.call_tool("echo_with_length", message="four")
        try:
            await env.call_tool("no_such_tool")
            report["bad_tool"] = "no error"
        except Exception as exc:  # upstream raises RuntimeError for a JSON-RPC error
            report["bad_tool"] = f"{type(exc).__name__}: {exc}"
        state = await env.state()
        report["state"] = state.model_dump()
        if capacity == "many":
            child = await env.new_session()
            report["child_reset"] = (await child.reset()).observation.model_dump()
        else:  # the one session is taken: another client is refused, clearly
            try:
                async with GenericEnvClient(base_url=url) as other:
                    await other.reset()
                report["second"] = "no error"
            except Exception as exc:
                report["second"] = f"{type(exc).__name__}: {exc}"

    class Recording(GenericEnvClient):  # every frame it receives, to show no fork frame or field reaches it
        frames: list = []  # noqa: RUF012 (one list for the run: the report reads it after the client closes)

        async def _receive(self):
            msg = await super()._receive()
            Recording.frames.append(msg)
            return msg

    async with Recording(base_url=url) as generic:
        await generic.reset()
        step = await generic.step({"message": "hello"})
        report["generic"] = {
            "observation": step.observation,
            "reward": step.reward,
            "done": step.done,
            "metadata": step.metadata,
        }
        report["generic_state"] = await generic.state()
    report["generic_frames"] = Recording.frames
    async with EchoClient(base_url=url) as typed:
        await typed.reset()
        step = await typed.step(EchoAction(message="typed"))
        report["typed"] = {"echoed": step.observation.echoed_message, "reward": step.reward}
    print(json.dumps(report, default=str))


def sync_part(url: str) -> dict:
    with EchoClient(base_url=url).sync() as env:
        env.reset()
        step = env.step(EchoAction(message="sync"))
        return {"echoed": step.observation.echoed_message, "steps": env.state()["step_count"]}


asyncio.run(main(sys.argv[1], sys.argv[2]))
print(json.dumps({"sync": sync_part(sys.argv[1])}))
