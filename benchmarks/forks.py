"""How long a snapshot, a restore and a fork into 8 children take, per bundled env.

    python benchmarks/forks.py [--rounds 200] [--atari-rounds 10] [--children 8] [--envs blackjack grid chess atari] [--output PATH | --no-save] [--json]

Each env's server runs as its own process (`python -m openenv.server`, uvloop), on 127.0.0.1.
One client session resets (seed 1), plays a few prefix steps, and then, round by round:

- `snapshot`:         one snapshot round trip (released after, untimed).
- `restore`:          one restore round trip to the snapshot taken before the rounds.
- `fork_server`:      the fork frame alone: the server builds N envs, restores the state into each,
                      registers them as sessions and answers with their ids (children then
                      closed, untimed).
- `fork_connected`:   `await env.fork(N)`: the same, plus a client for each child, connected
                      (its WebSocket attached): what a user waits before the children can step.

p50 and p90 in ms are reported. Results: benchmarks/results/forks.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any

import _eventloop
import _results
from _harness import ROOT, serve

NAME = "forks"
# env: (folder, reset options, prefix actions); driven with the generic (dict) client
CASES: dict[str, tuple[str, dict[str, Any], list[dict[str, Any]]]] = {
    "blackjack": ("blackjack_env", {"decks": 2}, [{"action": "hit"}]),
    "grid": ("grid_world_env", {"size": 8, "pits": 0}, [{"move": "up"}, {"move": "left"}]),
    "chess": ("chess_env", {}, [{"move": "e2e4"}, {"move": "d2d4"}]),
    "atari": ("atari_env", {"game": "pong"}, [{"action": 0}] * 10),
}


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1e3,
        "rounds": len(ordered),
    }


async def drive(url: str, reset: dict[str, Any], prefix: list[dict[str, Any]], rounds: int, n: int) -> dict[str, Any]:
    from openenv import GenericEnvClient
    from openenv.protocol import dumps

    times: dict[str, list[float]] = {"snapshot": [], "restore": [], "fork_server": [], "fork_connected": []}
    async with GenericEnvClient(url) as env:
        await env.reset(seed=1, **reset)
        for action in prefix:
            await env.step(action)
        base = await env.snapshot()
        conn = env._conn
        assert conn is not None
        for _ in range(rounds):
            t = time.perf_counter()
            snap = await env.snapshot()
            times["snapshot"].append(time.perf_counter() - t)
            await env.release(snap)

            t = time.perf_counter()
            await env.restore(base)
            times["restore"].append(time.perf_counter() - t)

            t = time.perf_counter()
            raw = await conn.call(dumps({"type": "fork", "data": {"n": n}}), 60)
            times["fork_server"].append(time.perf_counter() - t)
            ids = env._reply(raw, "fork")["session_ids"]
            assert len(ids) == n
            # Claim and close them, untimed, so the next round has the capacity.
            claim = [env._spawn(f"{env.ws_url}?session_id={sid}") for sid in ids]
            for child in claim:
                await child.connect()
                await child.close()

            t = time.perf_counter()
            children = await env.fork(n)
            times["fork_connected"].append(time.perf_counter() - t)
            for child in children:
                await child.close()
            env._children.clear()
    return {name: _stats(samples) for name, samples in times.items()}


async def _drive_and_loop(*args: Any) -> tuple[dict[str, Any], str]:
    return await drive(*args), _eventloop.running()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--atari-rounds", type=int, default=10, help="Atari's children each load a ROM: fewer rounds")
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--envs", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    results: dict[str, Any] = {}
    loops: dict[str, dict[str, str | None]] = {}
    for name in args.envs:
        folder, reset, prefix = CASES[name]
        cmd = [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"]
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(serve(cmd, ROOT / "envs" / folder, env))
            res, client_loop = _eventloop.run(
                _drive_and_loop(
                    server.url, reset, prefix, args.atari_rounds if name == "atari" else args.rounds, args.children
                )
            )
        results[name] = res
        loops[name] = {"client": client_loop, "server": server.loop}
        print(
            f"{name:10s} snapshot {res['snapshot']['p50_ms']:6.2f} ms  restore {res['restore']['p50_ms']:6.2f} ms  "
            f"fork x{args.children}: server {res['fork_server']['p50_ms']:7.2f} ms, connected {res['fork_connected']['p50_ms']:7.2f} ms (p50)",
            file=sys.stderr,
        )
    doc = _results.save(NAME, args, {"children": args.children, "envs": results}, loops)
    if args.json:
        print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
