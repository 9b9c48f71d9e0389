"""Steps per second of CartPole imported from Gymnasium beside the same CartPole written by hand.

    python benchmarks/imported_steps.py [--seconds 3] [--rounds 3] [--sessions 1 4] [--output PATH | --no-save] [--json]

Two contestants, on the same server (`python -m openenv.server`, uvloop) and driven by the same
client (`GenericEnvClient`, uvloop) with the same random policy, interleaved round by round so
that machine noise hits both alike (the median round is reported):

- imported:   the folder `openenv import CartPole-v1` writes (into a temporary folder, at the start
              of the run), served as its image serves it: `gymnasium.make` per session, its spaces
              mapped to JSON by `openenv.interop.gymnasium`.
- hand_written: `_cartpole_app.py`, the same game and the same JSON shapes in plain Python.

The target (issue 51): the imported one within 2x of the hand-written one (`ratio` ≥ 0.5).
Results: benchmarks/results/imported_steps.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import HERE, ROOT, BenchmarkError, entry, run_checked, serve

from openenv import GenericEnvClient

NAME = "imported_steps"
GYMNASIUM_ID = "CartPole-v1"
TARGET_RATIO = 0.5  # imported steps/s over hand-written: within 2x


async def drive(url: str, sessions: int, seconds: float) -> dict[str, Any]:
    """`sessions` clients each stepping with random pushes for `seconds` (a reset when an episode ends)."""
    samples: list[float] = []
    resets: list[float] = []
    returns: list[float] = []

    async def one(i: int) -> None:
        rng = random.Random(i)
        async with GenericEnvClient(url, message_timeout_s=120) as env:
            result = await env.reset(seed=i)
            episode = 0.0
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                if result.done:
                    returns.append(episode)
                    t0 = time.perf_counter()
                    result, episode = await env.reset(seed=rng.randrange(2**31)), 0.0
                    resets.append(time.perf_counter() - t0)
                    continue
                t0 = time.perf_counter()
                result = await env.step({"action": rng.randrange(2)})
                samples.append(time.perf_counter() - t0)
                episode += result.reward or 0.0

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    elapsed = time.perf_counter() - start
    if not samples:
        raise BenchmarkError(f"no step finished at {url} in {seconds:g} s")
    samples.sort()
    return {
        "steps_per_s": len(samples) / elapsed,
        "p50_ms": statistics.median(samples) * 1e3,
        "p99_ms": samples[max(0, int(len(samples) * 0.99) - 1)] * 1e3,
        "reset_p50_ms": statistics.median(resets) * 1e3 if resets else None,
        "episodes": len(returns),
        "mean_return": statistics.fmean(returns) if returns else None,
        "loop": _eventloop.running(),
    }


def imported_folder(parent: Path) -> Path:
    """`openenv import CartPole-v1 -o PARENT/cartpole_env`, as a user runs it."""
    folder = parent / "cartpole_env"
    run_checked(
        [sys.executable, "-m", "openenv.cli", "import", GYMNASIUM_ID, "-o", str(folder)],
        what=f"openenv import {GYMNASIUM_ID}",
        timeout=300,
        cwd=parent,
    )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="stepping time per contestant, level and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    server = [sys.executable, "-m", "openenv.server"]
    loops: dict[str, dict[str, str | None]] = {}
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="imported-steps-") as tmp:
        stacks = {
            "imported": ([*server, "server.app:app", "--log-level", "warning"], imported_folder(Path(tmp))),
            "hand_written": ([*server, "_cartpole_app:app", "--log-level", "warning"], HERE),
        }
        env = {"PYTHONPATH": str(ROOT)}
        for r in range(args.rounds):
            for name, (cmd, cwd) in stacks.items():
                with contextlib.ExitStack() as stack:
                    srv = stack.enter_context(serve(cmd, cwd, env))
                    for n in args.sessions:
                        res = _eventloop.run(drive(srv.url, n, args.seconds))
                        loops[name] = {"client": res.pop("loop"), "server": srv.loop}
                        runs.setdefault(name, {}).setdefault(n, []).append(res)
                        print(
                            f"  round {r + 1} {name:12s} {n:2d} sessions: {res['steps_per_s']:7.0f} steps/s  "
                            f"p50 {res['p50_ms']:.2f} ms",
                            file=sys.stderr,
                        )
    steps = {name: {n: _median_run(per[n]) for n in args.sessions} for name, per in runs.items()}
    ratios = {n: steps["imported"][n]["steps_per_s"] / steps["hand_written"][n]["steps_per_s"] for n in args.sessions}
    for n, ratio in ratios.items():
        verdict = "within" if ratio >= TARGET_RATIO else "NOT within"
        print(f"{n} sessions: imported runs at {ratio:.2f} of hand-written ({verdict} 2x)", file=sys.stderr)
    results = {"gymnasium_id": GYMNASIUM_ID, "steps": steps, "ratios": ratios, "target_ratio": TARGET_RATIO}
    _results.publish(NAME, args, results, loops)


def _median_run(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median steps/s (its latencies with it), and every round's rate."""
    ordered = sorted(rounds, key=lambda res: res["steps_per_s"])
    return {**ordered[(len(ordered) - 1) // 2], "rounds_steps_per_s": [res["steps_per_s"] for res in rounds]}


if __name__ == "__main__":
    entry(main)
