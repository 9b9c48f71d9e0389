"""Step throughput and latency, side by side in one run.

    python benchmarks/step_throughput.py [--seconds 3] [--rounds 3] [--output PATH | --no-save] [--json]

Five stacks, each at 1, 16 and 256 concurrent sessions, interleaved round by round so that machine
noise hits them alike (the median round is reported):

- limit:    the same JSON echo over raw WebSocket frames, no framework at all: a picows server on
            one event loop (`_raw_app.py`), driven by the same raw picows client. What one Python
            process does with these frames on this machine.
- ceiling:  a bare Starlette WebSocket JSON echo on uvicorn (httptools, sans-I/O websockets, no
            compression) driven by a raw picows client: no validation, no env.
- upstream: openenv-core 0.3.0's create_app + its own EnvClient (run in its own venv), served by
            uvicorn with its defaults, the way upstream's Spaces run it, but for the loop (h11,
            per-message compression on, a backlog of 2,048).
- upstream_equal: the same, its server on our transport settings (httptools, sans-I/O websockets,
            no compression, our backlog): what is left of the gap is the stacks above the transport.
- ours:     envs/echo_env on `python -m openenv.server` + openenv.EnvClient (typed).

Every client and every server runs on uvloop (`_eventloop.LOOP`; upstream's venv gets the same version
from scripts/upstream-venv); a contestant without it fails the run. Each server gets a port from
the OS and is polled on /health; each driver's exit status is checked.

Then the idle-session cost: RSS and thread count of our server before and after opening 1,000
sessions that each did a reset. Results: benchmarks/results/step_throughput.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
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
    serve,
    upstream_stack,
)

NAME = "step_throughput"


def drive(python: str, kind: str, url: str, sessions: int, seconds: float) -> dict[str, Any]:
    env = {**os.environ, **(UPSTREAM_ENV if kind == "upstream" else {})}
    out = run_checked(
        [python, str(HERE / "_drivers.py"), kind, url, str(sessions), str(seconds)],
        what=f"the {kind} driver",
        timeout=seconds + 120,
        cwd=HERE,
        env=env,
    )
    result = json_line(out, f"the {kind} driver")
    result["steps_per_s"] = result["steps"] / result["seconds"]
    return result


def stacks(upstream_python: str) -> dict[str, dict[str, Any]]:
    ours = sys.executable
    return {
        "limit": {
            "server": [ours, "_raw_app.py"],
            "cwd": HERE,
            "client": (ours, "picows"),
            "env": {},
        },
        "ceiling": {
            "server": [
                ours,
                "-m",
                "uvicorn",
                "_ceiling_app:app",
                "--loop",
                _eventloop.LOOP,
                "--http",
                "httptools",
                "--ws",
                "websockets-sansio",
                "--ws-per-message-deflate",
                "false",
                "--log-level",
                "warning",
            ],
            "cwd": HERE,
            "client": (ours, "picows"),
            "env": {},
        },
        "upstream": upstream_stack(upstream_python, "_upstream_echo"),
        "upstream_equal": upstream_stack(upstream_python, "_upstream_echo", transport="ours"),
        "ours": ours_stack("echo_env"),
    }


def measure_throughput(
    upstream_python: str, seconds: float, rounds: int, levels: list[int], loops: dict[str, dict[str, str | None]]
) -> dict[str, dict[int, dict[str, Any]]]:
    runs = interleaved_runs(
        stacks(upstream_python),
        rounds,
        levels,
        lambda python, kind, url, n: drive(python, kind, url, n, seconds),
        loops,
        lambda res: f"{res['steps_per_s']:9.0f} steps/s  p50 {res['p50_us']:7.1f} µs",
    )
    summary: dict[str, dict[int, dict[str, Any]]] = {}
    for name, per_level in runs.items():
        for n, results in per_level.items():
            best = sorted(results, key=lambda x: x["steps_per_s"])[len(results) // 2]  # the median round
            summary.setdefault(name, {})[n] = {
                "steps_per_s": round(best["steps_per_s"]),
                "p50_us": round(best["p50_us"], 1),
                "p99_us": round(best["p99_us"], 1),
                "all_rounds_steps_per_s": [round(x["steps_per_s"]) for x in results],
            }
    return summary


def _rss_threads(pid: int) -> tuple[int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"].strip())


def measure_idle_sessions(count: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "envs"))
    from echo_env import EchoEnv

    spec = stacks("")["ours"]
    with serve(spec["server"], spec["cwd"], env={"OPENENV_MAX_SESSIONS": str(count + 10)}) as srv:
        url = srv.url

        async def run() -> dict[str, Any]:
            warm = [EchoEnv(url) for _ in range(8)]
            for c in warm:  # warm the pool, code paths and allocator before the baseline
                await c.reset()
            for c in warm:
                await c.close()
            await asyncio.sleep(0.5)
            rss0, threads0 = _rss_threads(srv.pid)
            clients = [EchoEnv(url) for _ in range(count)]
            for i in range(0, count, 50):
                await asyncio.gather(*(c.reset() for c in clients[i : i + 50]))
            await asyncio.sleep(0.5)
            rss1, threads1 = _rss_threads(srv.pid)
            env_bytes = _echo_env_bytes()
            for c in clients:
                await c.close()
            return {
                "sessions": count,
                "rss_before_mb": round(rss0 / 2**20, 1),
                "rss_after_mb": round(rss1 / 2**20, 1),
                "kb_per_session": round((rss1 - rss0) / count / 1024, 1),
                "env_instance_kb": round(env_bytes / 1024, 2),
                "kb_per_session_beyond_env": round(((rss1 - rss0) / count - env_bytes) / 1024, 1),
                "threads_before": threads0,
                "threads_after": threads1,
                "client_loop": _eventloop.running(),
                "server_loop": srv.loop,
            }

        return _eventloop.run(run())


def _echo_env_bytes() -> int:
    """Approximate heap size of one echo environment instance after a reset (tracemalloc)."""
    import tracemalloc

    sys.path.insert(0, str(ROOT / "envs" / "echo_env"))
    from server.echo_environment import EchoEnvironment

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    envs = [EchoEnvironment() for _ in range(100)]
    for e in envs:
        e.reset()
    size = (tracemalloc.get_traced_memory()[0] - before) / 100
    tracemalloc.stop()
    return int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (after 1 s warm-up)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16, 256])
    parser.add_argument("--idle", type=int, default=1000, help="idle sessions for the memory check (0 skips)")
    add_upstream_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    require_upstream(args.upstream_python)

    loops: dict[str, dict[str, str | None]] = {}
    summary = measure_throughput(args.upstream_python, args.seconds, args.rounds, args.sessions, loops)
    ratios = {}
    for n in args.sessions:
        ours, up, equal, ceil, limit = (
            summary[k][n]["steps_per_s"] for k in ("ours", "upstream", "upstream_equal", "ceiling", "limit")
        )
        ratios[n] = {
            "ours_vs_upstream": round(ours / up, 2),
            "ours_vs_upstream_equal": round(ours / equal, 2),
            "ours_vs_ceiling": round(ours / ceil, 2),
            "ours_vs_limit": round(ours / limit, 2),
        }
    idle = measure_idle_sessions(args.idle) if args.idle else None
    if idle:
        loops["ours, idle sessions"] = {"client": idle.pop("client_loop"), "server": idle.pop("server_loop")}
    report = {
        "throughput": summary,
        "ratios": ratios,
        "idle_sessions": idle,
        "stacks": describe_stacks(stacks(args.upstream_python), args.upstream_python),
    }
    if _results.publish(NAME, args, report, loops, upstream_python=args.upstream_python):
        return
    print(
        f"\nstep throughput ({os.cpu_count()} cores, median of {args.rounds} rounds, {args.seconds:g} s each, all on {_eventloop.LOOP})"
    )
    print(f"{'stack':10s} {'sessions':>8s} {'steps/s':>10s} {'p50 µs':>9s} {'p99 µs':>9s}")
    for name in ("limit", "ceiling", "upstream", "upstream_equal", "ours"):
        for n in args.sessions:
            r = summary[name][n]
            print(f"{name:10s} {n:8d} {r['steps_per_s']:10d} {r['p50_us']:9.1f} {r['p99_us']:9.1f}")
    for n, r in ratios.items():
        print(
            f"{n:3d} sessions: ours = {r['ours_vs_upstream']:.2f}x upstream ({r['ours_vs_upstream_equal']:.2f}x on "
            f"equal transport), {r['ours_vs_ceiling']:.0%} of the ceiling, {r['ours_vs_limit']:.0%} of the limit"
        )
    if idle:
        print(
            f"{idle['sessions']} idle sessions: {idle['kb_per_session']} KB each "
            f"({idle['kb_per_session_beyond_env']} KB beyond the {idle['env_instance_kb']} KB env), "
            f"threads {idle['threads_before']} → {idle['threads_after']}"
        )


if __name__ == "__main__":
    entry(main)
