"""Rollout throughput: episodes per second at 1, 16 and 64 concurrent sessions, side by side.

    python benchmarks/rollouts.py [--seconds 3] [--rounds 3] [--sessions 1 16 64] [--output PATH | --no-save] [--json]

The game is envs/blackjack_env (the same rules code on both servers) and the policy is trivial
(hit below 17, else stand), so the numbers measure the rollout stack, not a model:

- engine:   our RolloutEngine + our EnvClient, against our server (`python -m openenv.server`).
- ours:     a hand-written loop (one coroutine per session) on our EnvClient, our server:
            what the engine's bookkeeping (records, retries, timeouts) costs on top.
- upstream: the same hand-written loop on upstream openenv-core 0.3.0's EnvClient, against
            upstream's create_app serving the same env on uvicorn (run in the upstream venv), with
            uvicorn's defaults (h11, per-message compression on, a backlog of 2,048).
- upstream_equal: the same, its server on our transport settings (httptools, sans-I/O
            websockets, no compression, our backlog).

Every client and every server runs on uvloop (`_eventloop.LOOP`); a contestant without it fails the
run. Servers (ports from the OS, polled on /health) and drivers (exit status checked) are separate
processes; stacks are interleaved round by round so machine noise hits them alike, and the median
round is reported. Target: engine >= 3x upstream at 64. Results: benchmarks/results/rollouts.json.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import _eventloop
import _results
from _harness import (
    HERE,
    ROOT,
    UPSTREAM_ENV,
    add_upstream_argument,
    describe_stacks,
    entry,
    interleaved_runs,
    json_line,
    ours_stack,
    require_upstream,
    run_checked,
    upstream_stack,
)

NAME = "rollouts"


def drive(python: str, kind: str, url: str, sessions: int, seconds: float) -> dict[str, Any]:
    env = {**os.environ, **(UPSTREAM_ENV if kind == "upstream" else {"PYTHONPATH": str(ROOT)})}
    out = run_checked(
        [python, str(HERE / "_rollout_drivers.py"), kind, url, str(sessions), str(seconds)],
        what=f"the {kind} rollout driver",
        timeout=seconds * 4 + 120,
        cwd=HERE,
        env=env,
    )
    result = json_line(out, f"the {kind} rollout driver")
    result["episodes_per_s"] = result["episodes"] / result["seconds"]
    result["steps_per_episode"] = result["steps"] / max(1, result["episodes"])
    return result


def stacks(upstream_python: str) -> dict[str, dict[str, Any]]:
    return {
        "engine": ours_stack("blackjack_env", client="engine"),
        "ours": ours_stack("blackjack_env"),
        "upstream": upstream_stack(upstream_python, "_upstream_blackjack"),
        "upstream_equal": upstream_stack(upstream_python, "_upstream_blackjack", transport="ours"),
    }


def measure(
    upstream_python: str, seconds: float, rounds: int, levels: list[int], loops: dict[str, dict[str, str | None]]
) -> dict[str, dict[int, dict[str, Any]]]:
    runs = interleaved_runs(
        stacks(upstream_python),
        rounds,
        levels,
        lambda python, kind, url, n: drive(python, kind, url, n, seconds),
        loops,
        lambda res: f"{res['episodes_per_s']:8.0f} episodes/s",
        server_env={"OPENENV_MAX_SESSIONS": str(max(levels) * 2)},
    )
    summary: dict[str, dict[int, dict[str, Any]]] = {}
    for name, per_level in runs.items():
        for n, results in per_level.items():
            median = sorted(results, key=lambda x: x["episodes_per_s"])[len(results) // 2]
            summary.setdefault(name, {})[n] = {
                "episodes_per_s": round(median["episodes_per_s"], 1),
                "steps_per_episode": round(median["steps_per_episode"], 3),
                "all_rounds": [round(x["episodes_per_s"], 1) for x in results],
            }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16, 64])
    add_upstream_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    require_upstream(args.upstream_python)
    loops: dict[str, dict[str, str | None]] = {}
    summary = measure(args.upstream_python, args.seconds, args.rounds, args.sessions, loops)
    ratios = {
        n: {
            "engine_vs_upstream": round(
                summary["engine"][n]["episodes_per_s"] / summary["upstream"][n]["episodes_per_s"], 2
            ),
            "engine_vs_upstream_equal": round(
                summary["engine"][n]["episodes_per_s"] / summary["upstream_equal"][n]["episodes_per_s"], 2
            ),
            "engine_vs_ours_loop": round(
                summary["engine"][n]["episodes_per_s"] / summary["ours"][n]["episodes_per_s"], 2
            ),
        }
        for n in args.sessions
    }
    report = {
        "episodes_per_s": summary,
        "ratios": ratios,
        "stacks": describe_stacks(stacks(args.upstream_python), args.upstream_python),
    }
    if _results.publish(NAME, args, report, loops, upstream_python=args.upstream_python):
        return
    print(
        f"\nblackjack rollouts, trivial policy ({os.cpu_count()} cores, median of {args.rounds} rounds, {args.seconds:g} s each, all on {_eventloop.LOOP})"
    )
    print(f"{'stack':10s} {'sessions':>8s} {'episodes/s':>11s} {'steps/ep':>9s}")
    for name in ("engine", "ours", "upstream", "upstream_equal"):
        for n in args.sessions:
            r = summary[name][n]
            print(f"{name:10s} {n:8d} {r['episodes_per_s']:11.1f} {r['steps_per_episode']:9.2f}")
    for n, r in ratios.items():
        print(
            f"{n:3d} sessions: engine = {r['engine_vs_upstream']:.2f}x upstream's loop ({r['engine_vs_upstream_equal']:.2f}x "
            f"on equal transport), {r['engine_vs_ours_loop']:.2f}x our bare loop"
        )


if __name__ == "__main__":
    entry(main)
