"""Step throughput and latency, side by side in one run.

    python benchmarks/step_throughput.py [--seconds 3] [--rounds 3] [--json]

Three stacks, each at 1 and 16 concurrent sessions, interleaved round by round so that machine
noise hits them alike (the median round is reported):

- ceiling:  a bare Starlette WebSocket JSON echo on uvicorn (uvloop, httptools, sans-I/O
            websockets, no compression) driven by a raw picows client: no validation, no env.
- upstream: openenv-core 0.3.0's create_app + its own EnvClient, as shipped (run in its own venv).
- ours:     envs/echo_env on `python -m openenv.server` + openenv.EnvClient (typed).

Then the idle-session cost: RSS and thread count of our server before and after opening 1,000
sessions that each did a reset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
DEFAULT_UPSTREAM = ROOT / ".cache" / "upstream-venv" / "bin" / "python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server at {url} did not become healthy")


@contextmanager
def server(cmd: list[str], cwd: Path, env: dict[str, str] | None = None):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*cmd, "--host", "127.0.0.1", "--port", str(port)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # never a pipe nobody reads: a chatty server would stall on it
    )
    try:
        wait_healthy(url)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def drive(python: str, kind: str, url: str, sessions: int, seconds: float) -> dict[str, Any]:
    out = subprocess.run(
        [python, str(HERE / "_drivers.py"), kind, url, str(sessions), str(seconds)],
        capture_output=True, text=True, timeout=seconds + 120, cwd=HERE,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} driver failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["steps_per_s"] = result["steps"] / result["seconds"]
    return result


def stacks(upstream_python: str) -> dict[str, dict[str, Any]]:
    ours = sys.executable
    return {
        "ceiling": {
            "server": [ours, "-m", "uvicorn", "_ceiling_app:app", "--loop", "uvloop", "--http", "httptools",
                       "--ws", "websockets-sansio", "--ws-per-message-deflate", "false", "--log-level", "warning"],
            "cwd": HERE, "client": (ours, "picows"),
        },
        "upstream": {
            "server": [upstream_python, "-m", "uvicorn", "_upstream_echo:app", "--log-level", "warning"],
            "cwd": HERE, "client": (upstream_python, "upstream"),
        },
        "ours": {
            "server": [ours, "-m", "openenv.server", "server.app:app", "--log-level", "warning"],
            "cwd": ROOT / "envs" / "echo_env", "client": (ours, "ours"),
        },
    }


def measure_throughput(upstream_python: str, seconds: float, rounds: int, levels: list[int]) -> dict[str, dict[int, dict[str, float]]]:
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    defs = stacks(upstream_python)
    for r in range(rounds):
        for name, spec in defs.items():
            with server(spec["server"], spec["cwd"]) as (url, _):
                for n in levels:
                    res = drive(*spec["client"], url, n, seconds)
                    runs.setdefault(name, {}).setdefault(n, []).append(res)
                    print(f"  round {r + 1} {name:8s} {n:3d} sessions: {res['steps_per_s']:9.0f} steps/s  p50 {res['p50_us']:7.1f} µs", file=sys.stderr)
    summary: dict[str, dict[int, dict[str, float]]] = {}
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


def measure_idle_sessions(count: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "envs"))
    from echo_env import EchoEnv

    spec = stacks("")["ours"]
    with server(spec["server"], spec["cwd"], env={"OPENENV_MAX_SESSIONS": str(count + 10)}) as (url, proc):

        async def run() -> dict[str, float]:
            warm = [EchoEnv(url) for _ in range(8)]
            for c in warm:  # warm the pool, code paths and allocator before the baseline
                await c.reset()
            for c in warm:
                await c.close()
            await asyncio.sleep(0.5)
            rss0, threads0 = _rss_threads(proc.pid)
            clients = [EchoEnv(url) for _ in range(count)]
            for i in range(0, count, 50):
                await asyncio.gather(*(c.reset() for c in clients[i : i + 50]))
            await asyncio.sleep(0.5)
            rss1, threads1 = _rss_threads(proc.pid)
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
            }

        return asyncio.run(run())


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
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--idle", type=int, default=1000, help="idle sessions for the memory check (0 skips)")
    parser.add_argument("--upstream-python", default=str(DEFAULT_UPSTREAM), help="python of a venv with openenv-core==0.3.0")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    if not Path(args.upstream_python).exists():
        sys.exit(f"no upstream venv at {args.upstream_python}: run `bash scripts/upstream-venv` first")

    summary = measure_throughput(args.upstream_python, args.seconds, args.rounds, args.sessions)
    ratios = {}
    for n in args.sessions:
        ours, up, ceil = (summary[k][n]["steps_per_s"] for k in ("ours", "upstream", "ceiling"))
        ratios[n] = {"ours_vs_upstream": round(ours / up, 2), "ours_vs_ceiling": round(ours / ceil, 2)}
    idle = measure_idle_sessions(args.idle) if args.idle else None
    report = {"cpus": os.cpu_count(), "throughput": summary, "ratios": ratios, "idle_sessions": idle}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"\nstep throughput ({os.cpu_count()} cores, median of {args.rounds} rounds, {args.seconds:g} s each)")
    print(f"{'stack':10s} {'sessions':>8s} {'steps/s':>10s} {'p50 µs':>9s} {'p99 µs':>9s}")
    for name in ("ceiling", "upstream", "ours"):
        for n in args.sessions:
            r = summary[name][n]
            print(f"{name:10s} {n:8d} {r['steps_per_s']:10d} {r['p50_us']:9.1f} {r['p99_us']:9.1f}")
    for n, r in ratios.items():
        print(f"{n:3d} sessions: ours = {r['ours_vs_upstream']:.2f}× upstream, {r['ours_vs_ceiling']:.0%} of the ceiling")
    if idle:
        print(
            f"{idle['sessions']} idle sessions: {idle['kb_per_session']} KB each "
            f"({idle['kb_per_session_beyond_env']} KB beyond the {idle['env_instance_kb']} KB env), "
            f"threads {idle['threads_before']} → {idle['threads_after']}"
        )


if __name__ == "__main__":
    main()
