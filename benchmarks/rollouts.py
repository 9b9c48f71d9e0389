"""Rollout throughput: episodes per second at 1, 16 and 64 concurrent sessions, side by side.

    python benchmarks/rollouts.py [--seconds 3] [--rounds 3] [--sessions 1 16 64] [--json]

The game is envs/blackjack_env (the same rules code on both servers) and the policy is trivial
(hit below 17, else stand), so the numbers measure the rollout stack, not a model:

- engine:   our RolloutEngine + our EnvClient, against our server (`python -m openenv.server`).
- ours:     a hand-written loop (one coroutine per session) on our EnvClient, our server:
            what the engine's bookkeeping (records, retries, timeouts) costs on top.
- upstream: the same hand-written loop on upstream openenv-core 0.3.0's EnvClient, against
            upstream's create_app serving the same env (run in the upstream venv).

Servers and drivers are separate processes; stacks are interleaved round by round so machine
noise hits them alike, and the median round is reported. Target: engine >= 3x upstream at 64.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
DEFAULT_UPSTREAM = ROOT / ".cache" / "upstream-venv" / "bin" / "python"
sys.path.insert(0, str(HERE))

from step_throughput import free_port, wait_healthy  # noqa: E402


@contextmanager
def server(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A server subprocess on 127.0.0.1; its output goes to a temporary file.

    Not to a pipe: upstream's server logs a traceback per closed session, and an unread pipe
    fills up and stalls its event loop (the clients then see keep-alive timeouts).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*cmd, "--host", "127.0.0.1", "--port", str(port)], cwd=cwd,
                                env={**os.environ, **(env or {})}, stdout=log, stderr=log)
        try:
            wait_healthy(url)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def drive(python: str, kind: str, url: str, sessions: int, seconds: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)} if kind != "upstream" else {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [python, str(HERE / "_rollout_drivers.py"), kind, url, str(sessions), str(seconds)],
        capture_output=True, text=True, timeout=seconds * 4 + 120, cwd=HERE, env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} driver failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["episodes_per_s"] = result["episodes"] / result["seconds"]
    result["steps_per_episode"] = result["steps"] / max(1, result["episodes"])
    return result


def stacks(upstream_python: str) -> dict[str, dict[str, Any]]:
    ours_server = [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"]
    return {
        "engine": {"server": ours_server, "cwd": ROOT / "envs" / "blackjack_env", "client": (sys.executable, "engine")},
        "ours": {"server": ours_server, "cwd": ROOT / "envs" / "blackjack_env", "client": (sys.executable, "ours")},
        "upstream": {
            "server": [upstream_python, "-m", "uvicorn", "_upstream_blackjack:app", "--log-level", "warning"],
            "cwd": HERE, "client": (upstream_python, "upstream"),
        },
    }


def measure(upstream_python: str, seconds: float, rounds: int, levels: list[int]) -> dict[str, dict[int, dict[str, Any]]]:
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    server_env = {"OPENENV_MAX_SESSIONS": str(max(levels) * 2)}
    for r in range(rounds):
        for name, spec in stacks(upstream_python).items():
            with server(spec["server"], spec["cwd"], env=server_env) as (url, _):
                for n in levels:
                    res = drive(*spec["client"], url, n, seconds)
                    runs.setdefault(name, {}).setdefault(n, []).append(res)
                    print(f"  round {r + 1} {name:8s} {n:3d} sessions: {res['episodes_per_s']:8.0f} episodes/s", file=sys.stderr)
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
    parser.add_argument("--upstream-python", default=str(DEFAULT_UPSTREAM), help="python of a venv with openenv-core==0.3.0")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    if not Path(args.upstream_python).exists():
        sys.exit(f"no upstream venv at {args.upstream_python}: run `bash scripts/upstream-venv` first")
    summary = measure(args.upstream_python, args.seconds, args.rounds, args.sessions)
    ratios = {
        n: {
            "engine_vs_upstream": round(summary["engine"][n]["episodes_per_s"] / summary["upstream"][n]["episodes_per_s"], 2),
            "engine_vs_ours_loop": round(summary["engine"][n]["episodes_per_s"] / summary["ours"][n]["episodes_per_s"], 2),
        }
        for n in args.sessions
    }
    report = {"cpus": os.cpu_count(), "episodes_per_s": summary, "ratios": ratios}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"\nblackjack rollouts, trivial policy ({os.cpu_count()} cores, median of {args.rounds} rounds, {args.seconds:g} s each)")
    print(f"{'stack':10s} {'sessions':>8s} {'episodes/s':>11s} {'steps/ep':>9s}")
    for name in ("engine", "ours", "upstream"):
        for n in args.sessions:
            r = summary[name][n]
            print(f"{name:10s} {n:8d} {r['episodes_per_s']:11.1f} {r['steps_per_episode']:9.2f}")
    for n, r in ratios.items():
        print(f"{n:3d} sessions: engine = {r['engine_vs_upstream']:.2f}x upstream's loop, {r['engine_vs_ours_loop']:.2f}x our bare loop")


if __name__ == "__main__":
    main()
