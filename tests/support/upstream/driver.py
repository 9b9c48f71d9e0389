"""Drive a server with upstream openenv-core 0.3.0's own clients; print one JSON report.

Run with the upstream venv's Python: `python driver.py URL`.
"""

import asyncio
import json
import sys

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation
from openenv.core.generic_client import GenericEnvClient


class CountAction(Action):
    message: str = ""
    fail: bool = False
    meta: dict | None = None


class CountObservation(Observation):
    echoed: str
    count: int
    thread: str = ""


class CountClient(EnvClient):
    def _step_payload(self, action):
        return action.model_dump(exclude_none=True)

    def _parse_result(self, payload):
        obs = CountObservation(**payload["observation"], reward=payload.get("reward"), done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload):
        return payload


async def main(url):
    report = {}
    async with CountClient(url) as env:
        reset = await env.reset(seed=3)
        report["reset"] = {"echoed": reset.observation.echoed, "reward": reset.reward, "done": reset.done}
        counts = []
        for i in range(100):
            r = await env.step(CountAction(message=f"m{i}"))
            counts.append(r.observation.count)
        report["counts_ok"] = counts == list(range(1, 101))
        r = await env.step(CountAction(message="with meta", meta={"reward_components": {"a": 1}}))
        report["metadata"] = r.observation.metadata
        report["state"] = await env.state()
        try:
            await env.step(CountAction(message="b", fail=True))
            report["boom"] = "no error"
        except RuntimeError as exc:
            report["boom"] = str(exc)
        report["after_errors"] = (await env.step(CountAction(message="still"))).observation.count

    async with GenericEnvClient(url) as g:
        await g.reset()
        try:
            await g.step({"message": 5})
            report["bad"] = "no error"
        except RuntimeError as exc:
            report["bad"] = str(exc)
        r = await g.step({"message": "generic"})
        report["generic"] = {"observation": r.observation, "reward": r.reward, "done": r.done}

    async def one(i):
        async with CountClient(url) as env:
            await env.reset(seed=i)
            for _ in range(i + 1):
                r = await env.step(CountAction(message=str(i)))
            state = await env.state()
            return {"count": r.observation.count, "episode_id": state["episode_id"]}

    report["concurrent"] = await asyncio.gather(*(one(i) for i in range(8)))
    print(json.dumps(report))


asyncio.run(main(sys.argv[1]))
