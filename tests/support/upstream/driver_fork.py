"""Drive a fork-capable server of ours with upstream's generic client (0.3.0 or 0.10.0) and print
every frame it received, as one JSON report: it must never meet a fork frame or field.

Run with an upstream venv's Python: `python driver_fork.py URL`.
"""

import asyncio
import json
import sys

from openenv.core.generic_client import GenericEnvClient


class Recording(GenericEnvClient):
    frames: list = []  # noqa: RUF012 (one list for the run: the report reads it after the client closes)

    async def _receive(self):
        msg = await super()._receive()
        Recording.frames.append(msg)
        return msg


async def main(url):
    report = {}
    async with Recording(base_url=url) as env:
        reset = await env.reset()
        report["reset"] = reset.observation
        steps = []
        for i in range(5):
            r = await env.step({"message": f"m{i}"})
            steps.append(r.observation)
        report["steps"] = steps
        report["state"] = await env.state()
    report["frames"] = Recording.frames
    print(json.dumps(report))


asyncio.run(main(sys.argv[1]))
