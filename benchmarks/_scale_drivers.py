"""Sessions-at-scale driver: `python _scale_drivers.py KIND URL SESSIONS STEPS CAP_S` prints one JSON line.

SESSIONS clients connect at once (no ramp, no semaphore: the same for every KIND); when every
connect has finished, each connected session does a reset and STEPS steps, all sessions at the
same time, then closes. Every session is open while the others step. KIND is `ours`
(openenv.EnvClient, typed) or `upstream` (openenv-core's own EnvClient; run with the upstream
venv's Python); both use their clients' default timeouts (10 s to connect, 60 s per reply).

A session succeeds when its reset and all its steps answered. A run still going after CAP_S
seconds is cut off there: its unfinished sessions count as failed ("cut off at the cap").
Every kind runs on the same event loop (`_eventloop.LOOP`, uvloop) and raises its soft limit of
open files to the hard one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

import _eventloop

MESSAGE = "hello world"
HERE = Path(__file__).resolve().parent


def raise_open_files() -> int:
    """Soft limit of open files raised to the hard one; returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def _ours(url: str) -> tuple[Any, Any]:
    sys.path.insert(0, str(HERE.parent / "envs"))
    from echo_env import EchoAction, EchoEnv

    return (lambda: EchoEnv(url)), EchoAction(message=MESSAGE)


def _upstream(url: str) -> tuple[Any, Any]:
    sys.path.insert(0, str(HERE))
    from _upstream_echo import EchoAction, EchoClient

    return (lambda: EchoClient(url)), EchoAction(message=MESSAGE)


def _why(exc: BaseException) -> str:
    text = re.sub(r"(?:ws|http)s?://[^/\s]+(?:/ws)?", "the server", str(exc).split("\n")[0])  # runs differ in port only
    return f"{type(exc).__name__}: {text[:90]}" if text else type(exc).__name__


async def run(kind: str, url: str, sessions: int, steps: int, cap_s: float) -> dict[str, Any]:
    make, action = {"ours": _ours, "upstream": _upstream}[kind](url)
    perf = time.perf_counter
    connect_s: list[float] = []
    step_ns: list[int] = []
    failures: collections.Counter[str] = collections.Counter()
    done = {"connected": 0, "ok": 0, "steps": 0, "pending": sessions}
    all_connected = asyncio.Event()
    phase: dict[str, float] = {}

    def connect_finished() -> None:
        done["pending"] -= 1
        if done["pending"] == 0:
            phase["stepping"] = perf()
            all_connected.set()

    async def one() -> None:
        env = make()
        t0 = perf()
        try:
            await env.connect()
        except Exception as exc:
            failures["connect: " + _why(exc)] += 1
            connect_finished()
            return
        connect_s.append(perf() - t0)
        done["connected"] += 1
        connect_finished()
        try:
            await all_connected.wait()
            await env.reset()
            ns = time.perf_counter_ns
            for _ in range(steps):
                t1 = ns()
                await env.step(action)
                step_ns.append(ns() - t1)
                done["steps"] += 1
            done["ok"] += 1
        except Exception as exc:
            failures["episode: " + _why(exc)] += 1
        finally:
            with contextlib.suppress(Exception):  # closing is best effort: the server's side is measured
                await asyncio.wait_for(env.close(), 5)

    start = perf()
    tasks = [asyncio.ensure_future(one()) for _ in range(sessions)]
    _, unfinished = await asyncio.wait(tasks, timeout=cap_s)
    end = perf()
    if unfinished:
        failures[f"cut off at the cap of {cap_s:g} s"] += len(unfinished)
        for t in unfinished:
            t.cancel()
        await asyncio.wait(unfinished, timeout=10)
    connect_s.sort()
    step_ns.sort()
    stepping = end - phase.get("stepping", end)
    return {
        "sessions": sessions,
        "connected": done["connected"],
        "succeeded": done["ok"],
        "success_rate": done["ok"] / sessions,
        "failures": dict(failures.most_common(4)),
        "connect_p50_ms": round(connect_s[len(connect_s) // 2] * 1e3, 1) if connect_s else None,
        "connect_p99_ms": round(connect_s[int(len(connect_s) * 0.99)] * 1e3, 1) if connect_s else None,
        "connect_all_s": round(phase.get("stepping", end) - start, 2),
        "steps": done["steps"],
        "stepping_s": round(stepping, 2),
        "steps_per_s": round(done["steps"] / stepping) if stepping > 0 else 0,
        "p50_ms": round(step_ns[len(step_ns) // 2] / 1e6, 2) if step_ns else None,
        "p99_ms": round(step_ns[int(len(step_ns) * 0.99)] / 1e6, 2) if step_ns else None,
        "wall_s": round(end - start, 2),
        "loop": _eventloop.running(),
    }


def main() -> None:
    kind, url, sessions, steps, cap_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    files = raise_open_files()

    async def report() -> None:
        result = await run(kind, url, sessions, steps, cap_s)
        result["open_files_limit"] = files
        print(json.dumps(result), flush=True)
        os._exit(0)  # skip tearing down what a cut-off run left open: the numbers are out

    _eventloop.run(report())


if __name__ == "__main__":
    main()
