"""Step rates of the reference environments, and what the coding sandbox costs, in one run.

    python benchmarks/env_steps.py [--seconds 3] [--output PATH | --no-save] [--json]

Each env runs as its image runs it (`python -m openenv.server server.app:app`, a subprocess) and
is driven by its typed client with a random policy, at 1 and 4 concurrent sessions: steps per
second and the median / p99 step latency. For coding_env, side by side: a step in the episode's
persistent interpreter, a step in a fresh sandboxed interpreter, and (no server, no sandbox) a
bare `python -c` subprocess started with asyncio: the floor that a fresh interpreter cannot beat.

Clients and servers run on uvloop (`_eventloop.LOOP`; checked in each server process); each server
gets a port from the OS and is polled on /health. Results: benchmarks/results/env_steps.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import time
from typing import Any

import _eventloop
import _results
from _harness import ROOT, BenchmarkError, entry, serve

sys.path.insert(0, str(ROOT / "envs"))

from atari_env import AtariAction, AtariEnv
from blackjack_env import BlackjackAction, BlackjackEnv
from chess_env import ChessAction, ChessEnv
from coding_env import CodeAction, CodingEnv
from grid_world_env import GridAction, GridWorldEnv
from wordle_env import WordleAction, WordleEnv

NAME = "env_steps"

WORDS = ["crane", "house", "pilot", "water", "xyzzy"]
CASES: dict[str, tuple[str, Any, dict[str, Any], Any]] = {
    "blackjack": (
        "blackjack_env",
        BlackjackEnv,
        {},
        lambda rng, o: BlackjackAction(action=rng.choice(o.legal_actions)),
    ),
    "grid_world": (
        "grid_world_env",
        GridWorldEnv,
        {"size": 8},
        lambda rng, o: GridAction(move=rng.choice(["up", "down", "left", "right"])),
    ),
    "wordle": ("wordle_env", WordleEnv, {}, lambda rng, o: WordleAction(guess=rng.choice(WORDS))),
    "chess/random": (
        "chess_env",
        ChessEnv,
        {"opponent": "random"},
        lambda rng, o: ChessAction(move=rng.choice(o.legal_moves)),
    ),
    "chess/minimax2": (
        "chess_env",
        ChessEnv,
        {"opponent": "minimax", "depth": 2},
        lambda rng, o: ChessAction(move=rng.choice(o.legal_moves)),
    ),
    "atari/breakout": (
        "atari_env",
        AtariEnv,
        {"game": "breakout"},
        lambda rng, o: AtariAction(action=rng.randrange(len(o.legal_actions))),
    ),
    "coding/persist": (
        "coding_env",
        CodingEnv,
        {},
        lambda rng, o: CodeAction(code="n = globals().get('n', 0) + 1", persist=True),
    ),
    "coding/fresh": ("coding_env", CodingEnv, {}, lambda rng, o: CodeAction(code="print(1)")),
}


async def drive(
    url: str, client_cls: Any, reset_kwargs: dict[str, Any], choose: Any, sessions: int, seconds: float
) -> dict[str, float]:
    samples: list[float] = []

    async def one(i: int) -> None:
        rng = random.Random(i)
        async with client_cls(url, message_timeout_s=120) as env:
            result = await env.reset(seed=i, **reset_kwargs)
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                if result.done:
                    result = await env.reset(seed=rng.randrange(2**31), **reset_kwargs)
                    continue
                t0 = time.perf_counter()
                result = await env.step(choose(rng, result.observation))
                samples.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    elapsed = time.perf_counter() - start
    samples.sort()
    return {
        "steps_per_s": len(samples) / elapsed,
        "p50_ms": statistics.median(samples) * 1e3,
        "p99_ms": samples[int(len(samples) * 0.99) - 1] * 1e3,
    }


async def bare_subprocess(seconds: float) -> dict[str, float]:
    """`python -c 'print(1)'` via asyncio, no sandbox: the floor of a fresh interpreter."""
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            "/usr/bin/python3", "-s", "-c", "print(1)", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        samples.append(time.perf_counter() - t0)
        if proc.returncode != 0 or out != b"1\n":
            raise BenchmarkError(f"/usr/bin/python3 -s -c 'print(1)' exited {proc.returncode} printing {out!r}")
    return {
        "steps_per_s": len(samples) / seconds,
        "p50_ms": statistics.median(samples) * 1e3,
        "p99_ms": max(samples) * 1e3,
    }


async def _drive_and_loop(*args: Any) -> tuple[dict[str, float], str]:
    return await drive(*args), _eventloop.running()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    results: dict[str, dict[int, dict[str, float]]] = {}
    loops: dict[str, dict[str, str | None]] = {}
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with contextlib.ExitStack() as stack:
        servers: dict[str, Any] = {}
        for name, (folder, client_cls, reset_kwargs, choose) in CASES.items():
            if folder not in servers:
                cmd = [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"]
                servers[folder] = stack.enter_context(serve(cmd, ROOT / "envs" / folder, env))
            server = servers[folder]
            for sessions in (1, 4):
                res, client_loop = _eventloop.run(
                    _drive_and_loop(server.url, client_cls, reset_kwargs, choose, sessions, args.seconds)
                )
                results.setdefault(name, {})[sessions] = res
                loops[name] = {"client": client_loop, "server": server.loop}
                print(
                    f"{name:16s} {sessions} sessions: {res['steps_per_s']:8.0f} steps/s  p50 {res['p50_ms']:7.2f} ms  p99 {res['p99_ms']:7.2f} ms",
                    file=sys.stderr,
                )
    bare, bare_loop = _eventloop.run(_bare_and_loop(args.seconds))
    results["bare python -c (no sandbox)"] = {1: bare}
    loops["bare python -c (no sandbox)"] = {"client": bare_loop, "server": None}
    print(
        f"{'bare python -c':16s} 1 session : {bare['steps_per_s']:8.0f} runs/s   p50 {bare['p50_ms']:7.2f} ms  p99 {bare['p99_ms']:7.2f} ms",
        file=sys.stderr,
    )
    doc = _results.save(NAME, args, {"steps": results}, loops)
    if args.json:
        print(json.dumps(doc, indent=2))


async def _bare_and_loop(seconds: float) -> tuple[dict[str, float], str]:
    return await bare_subprocess(seconds), _eventloop.running()


if __name__ == "__main__":
    entry(main)
