"""Rollout load drivers: `python _rollout_drivers.py KIND URL SESSIONS SECONDS` prints one JSON line.

Each plays blackjack episodes with the same trivial policy (hit below 17, else stand), seeds
0, 1, 2, ... for as long as SECONDS (after a short warm-up), and reports episodes and steps.

- `engine`:   openenv.training.RolloutEngine (ours), SESSIONS concurrent sessions.
- `ours`:     a hand-written loop on our EnvClient, one coroutine per session.
- `upstream`: the same loop on upstream openenv-core's EnvClient (run with the upstream venv's Python).

Every kind runs on the same event loop (`_eventloop.LOOP`, uvloop); a Python without it fails.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time

import _eventloop

WARMUP_S = 0.5


def choose(total: int) -> dict:
    return {"action": "hit" if total < 17 else "stand"}


async def run_engine(url: str, sessions: int, seconds: float) -> tuple[int, int, float]:
    from openenv.training import RolloutEngine

    def policy(inp):
        return choose(inp.observation["player_total"])

    engine = RolloutEngine(url, policy, concurrency=sessions)
    warm = await engine.run(sessions * 4, base_seed=10**6)  # warm-up, and a first rate estimate
    rate = len(warm) / max(warm.elapsed_s, 1e-3)
    count = max(sessions * 4, int(rate * seconds * 1.2))
    batch = await engine.run(count)
    return len(batch), sum(r.length for r in batch), batch.elapsed_s


async def _loop(make_client, step_of, sessions: int, seconds: float) -> tuple[int, int, float]:
    """Each session connects once, plays through the warm-up, then counts the episodes it finishes."""
    seeds = itertools.count()
    counts = [0, 0]
    start = time.perf_counter() + WARMUP_S
    end = start + seconds

    async def one() -> None:
        env = make_client()
        await env.connect()
        try:
            while True:
                result = await env.reset(seed=next(seeds))
                steps = 0
                while not result.done:
                    result = await env.step(step_of(result))
                    steps += 1
                now = time.perf_counter()
                if now >= end:
                    return
                if now >= start:
                    counts[0] += 1
                    counts[1] += steps
        finally:
            await env.close()

    await asyncio.gather(*(one() for _ in range(sessions)))
    return counts[0], counts[1], seconds


async def run_ours(url: str, sessions: int, seconds: float) -> tuple[int, int, float]:
    from openenv import GenericEnvClient

    return await _loop(
        lambda: GenericEnvClient(url), lambda r: choose(r.observation["player_total"]), sessions, seconds
    )


async def run_upstream(url: str, sessions: int, seconds: float) -> tuple[int, int, float]:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient

    class Client(EnvClient):
        def _step_payload(self, action):
            return action

        def _parse_result(self, payload):
            return StepResult(
                observation=payload.get("observation", {}),
                reward=payload.get("reward"),
                done=payload.get("done", False),
            )

        def _parse_state(self, payload):
            return payload

    return await _loop(lambda: Client(url), lambda r: choose(r.observation["player_total"]), sessions, seconds)


async def _measured(runner, url: str, sessions: int, seconds: float) -> tuple[tuple[int, int, float], str]:
    return await runner(url, sessions, seconds), _eventloop.running()


def main() -> None:
    kind, url, sessions, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    runner = {"engine": run_engine, "ours": run_ours, "upstream": run_upstream}[kind]
    (episodes, steps, elapsed), loop = _eventloop.run(_measured(runner, url, sessions, seconds))
    print(json.dumps({"episodes": episodes, "steps": steps, "seconds": elapsed, "loop": loop}))


if __name__ == "__main__":
    main()
