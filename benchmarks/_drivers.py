"""Load drivers: `python _drivers.py KIND URL SESSIONS SECONDS` prints one JSON result line.

KIND is `picows` (the ceiling's raw client), `ours` (openenv.EnvClient, typed), or `upstream`
(openenv-core's own EnvClient; run with the upstream venv's Python). Every kind runs on the same
event loop (`_eventloop.LOOP`, uvloop); a Python without it fails instead of falling back to asyncio.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import _eventloop

MESSAGE = "hello world"
WARMUP_S = 1.0


async def _loop(step, seconds: float, samples: list[int]) -> int:
    perf = time.perf_counter_ns
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:  # warm-up: not counted
        await step()
    n = 0
    deadline = perf() + int(seconds * 1e9)
    while True:
        t0 = perf()
        await step()
        t1 = perf()
        samples.append(t1 - t0)
        n += 1
        if t1 >= deadline:
            return n


async def run_picows(url: str, sessions: int, seconds: float, samples: list[int]) -> int:
    import orjson
    from picows import WSListener, WSMsgType, ws_connect

    loop = asyncio.get_running_loop()

    class Listener(WSListener):
        fut = None

        def on_ws_frame(self, transport, frame):
            self.fut.set_result(frame.get_payload_as_bytes())

    async def one() -> int:
        transport, listener = await ws_connect(Listener, url.replace("http", "ws") + "/ws")
        frame = orjson.dumps({"type": "step", "data": {"message": MESSAGE}})

        async def step():
            listener.fut = loop.create_future()
            transport.send(WSMsgType.TEXT, frame)
            orjson.loads(await listener.fut)

        try:
            return await _loop(step, seconds, samples)
        finally:
            transport.disconnect()

    return sum(await asyncio.gather(*(one() for _ in range(sessions))))


async def run_ours(url: str, sessions: int, seconds: float, samples: list[int]) -> int:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "envs"))
    from echo_env import EchoAction, EchoEnv

    async def one() -> int:
        async with EchoEnv(url) as env:
            await env.reset()
            action = EchoAction(message=MESSAGE)
            return await _loop(lambda: env.step(action), seconds, samples)

    return sum(await asyncio.gather(*(one() for _ in range(sessions))))


async def run_upstream(url: str, sessions: int, seconds: float, samples: list[int]) -> int:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    from _upstream_echo import EchoAction, EchoClient

    async def one() -> int:
        env = EchoClient(url)
        await env.connect()
        try:
            await env.reset()
            action = EchoAction(message=MESSAGE)
            return await _loop(lambda: env.step(action), seconds, samples)
        finally:
            await env.close()

    return sum(await asyncio.gather(*(one() for _ in range(sessions))))


async def _measured(runner, url: str, sessions: int, seconds: float, samples: list[int]) -> tuple[int, str]:
    return await runner(url, sessions, seconds, samples), _eventloop.running()


def main() -> None:
    kind, url, sessions, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    runner = {"picows": run_picows, "ours": run_ours, "upstream": run_upstream}[kind]
    samples: list[int] = []
    n, loop = _eventloop.run(_measured(runner, url, sessions, seconds, samples))
    samples.sort()
    print(
        json.dumps(
            {
                "steps": n,
                "seconds": seconds,
                "p50_us": samples[len(samples) // 2] / 1e3,
                "p99_us": samples[int(len(samples) * 0.99)] / 1e3,
                "loop": loop,
            }
        )
    )


if __name__ == "__main__":
    main()
