"""The random-policy soak every env passes: concurrent sessions, a step budget, no error."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openenv import EnvClient
from openenv.protocol import loads


@dataclass
class SoakReport:
    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    rewards: list[float] = field(default_factory=list)


async def soak(
    url: str,
    client_cls: type[EnvClient[Any, Any, Any]],
    choose: Callable[[random.Random, Any], Any],
    *,
    sessions: int = 4,
    steps: int = 1000,
    reset_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
) -> SoakReport:
    """Run `steps` random-policy steps spread over `sessions` concurrent sessions.

    `choose(rng, observation)` returns the next action. Every episode is reset with its own seed;
    any client error propagates (the test fails).
    """
    report = SoakReport()
    budget = [steps]
    start = time.perf_counter()

    async def session(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        async with client_cls(url, message_timeout_s=60) as env:
            result = await env.reset(seed=seed * 1000 + i, **(reset_kwargs or {}))
            while budget[0] > 0:
                if result.done:
                    report.episodes += 1
                    result = await env.reset(seed=rng.randrange(2**31), **(reset_kwargs or {}))
                    continue
                budget[0] -= 1
                result = await env.step(choose(rng, result.observation))
                report.steps += 1
                if result.reward is not None:
                    report.rewards.append(float(result.reward))

    await asyncio.gather(*(session(i) for i in range(sessions)))
    report.seconds = time.perf_counter() - start
    return report


def health(url: str) -> dict[str, Any]:
    """GET /health as a dict."""
    with urllib.request.urlopen(url + "/health", timeout=10) as reply:
        return loads(reply.read())


async def wait_sessions_closed(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """/health once its active session count is back to 0 (closing is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = await asyncio.to_thread(health, url)
        if body.get("active_sessions") == 0 or time.monotonic() > deadline:
            return body
        await asyncio.sleep(0.05)


def describe(records: list[logging.LogRecord]) -> str:
    """Log records as text, for an assertion message."""
    return "\n".join(f"{r.name}: {r.getMessage()}" for r in records)
