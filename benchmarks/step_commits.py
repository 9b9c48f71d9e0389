"""Our step path at earlier commits, side by side with upstream in one run: where did a ratio go?

    python benchmarks/step_commits.py [--commits REV ...] [--sessions 1 16] [--seconds 3] [--rounds 3]

Each commit's tree is exported (`git archive`) to a temporary folder; its own echo env server
(`python -m openenv.server`) and its own `benchmarks/_drivers.py ours` client run with that tree
first on PYTHONPATH, in this checkout's venv (the same libraries for every commit: only our code
differs). Upstream (openenv-core 0.3.0 in its venv, uvicorn's defaults but for the loop, as in
`step_throughput.py`) runs beside them. Every contestant runs once per round, in turn, so that the
machine's noise hits them alike; the median round is reported.

Besides steps per second, each run records the CPU time the server process and the client process
used per step (the kernel's accounting of each process, read before and after; the client's includes
its start-up, which is why upstream's heavy imports show there). CPU per step moves
far less than throughput when something else shares the machine, so a change in our path shows in
it even on a busy machine, and a ratio that moved while our CPU per step did not was the machine.

Results: benchmarks/results/step_commits.json.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import (
    HERE,
    ROOT,
    UPSTREAM_ENV,
    BenchmarkError,
    add_upstream_argument,
    entry,
    json_line,
    require_upstream,
    run_checked,
    serve,
    upstream_stack,
)

NAME = "step_commits"

# The last commit of each of the last turns before issue 52 (whose "two turns ago" is the first),
# and the tree this runs from.
DEFAULT_COMMITS = ["cb8ad23", "57cdeaf", "4830be9", "3876efd", "HEAD"]
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _export(rev: str, into: Path) -> tuple[str, Path]:
    """`rev`'s full commit id and its tree, written under `into`."""
    full = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if full.returncode != 0:
        raise BenchmarkError(f"no commit {rev!r} in {ROOT}: {full.stderr.strip()}")
    commit = full.stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    tree = into / commit[:12]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return commit, tree


def _process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stack_of(tree: Path) -> dict[str, Any]:
    return {
        "server": [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"],
        "cwd": tree / "envs" / "echo_env",
        "env": {"PYTHONPATH": str(tree)},
        "driver": (sys.executable, tree / "benchmarks" / "_drivers.py", "ours", {"PYTHONPATH": str(tree)}),
    }


def _upstream(upstream_python: str) -> dict[str, Any]:
    spec = upstream_stack(upstream_python, "_upstream_echo")
    return {**spec, "driver": (upstream_python, HERE / "_drivers.py", "upstream", UPSTREAM_ENV)}


def _drive(spec: dict[str, Any], url: str, server_pid: int, sessions: int, seconds: float) -> dict[str, Any]:
    python, script, kind, env = spec["driver"]
    server0, client0 = _process_cpu_s(server_pid), _children_cpu_s()
    out = run_checked(
        [python, str(script), kind, url, str(sessions), str(seconds)],
        what=f"the {kind} driver",
        timeout=seconds + 120,
        cwd=Path(script).parent,
        env={**os.environ, **env},
    )
    server_s, client_s = _process_cpu_s(server_pid) - server0, _children_cpu_s() - client0
    result = json_line(out, f"the {kind} driver")
    if result["loop"] != _eventloop.LOOP:
        raise BenchmarkError(f"the {kind} driver ran on {result['loop']}, not {_eventloop.LOOP}")
    # The driver's CPU covers its warm-up second too: its steps are counted by its own rate.
    warm_steps = result["steps"] / result["seconds"] * 1.0
    return {
        "steps_per_s": result["steps"] / result["seconds"],
        "p50_us": result["p50_us"],
        "server_cpu_us_per_step": server_s / (result["steps"] + warm_steps) * 1e6,
        "client_cpu_us_per_step": client_s / (result["steps"] + warm_steps) * 1e6,
    }


def measure(
    stacks: dict[str, dict[str, Any]], levels: list[int], seconds: float, rounds: int
) -> dict[str, dict[int, list[dict[str, Any]]]]:
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for r in range(rounds):
        for name, spec in stacks.items():
            with serve(spec["server"], spec["cwd"], spec["env"]) as srv:
                for n in levels:
                    res = _drive(spec, srv.url, srv.pid, n, seconds)
                    runs.setdefault(name, {}).setdefault(n, []).append(res)
                    print(
                        f"  round {r + 1} {name:14s} {n:3d} sessions: {res['steps_per_s']:8.0f} steps/s, "
                        f"server {res['server_cpu_us_per_step']:6.1f} µs CPU/step, "
                        f"client {res['client_cpu_us_per_step']:6.1f}",
                        file=sys.stderr,
                    )
    return runs


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", nargs="+", default=DEFAULT_COMMITS, help="revisions of ours to measure")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (after 1 s warm-up)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    add_upstream_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    require_upstream(args.upstream_python)

    with tempfile.TemporaryDirectory(prefix="openenv-commits-") as tmp:
        stacks: dict[str, dict[str, Any]] = {"upstream": _upstream(args.upstream_python)}
        commits: dict[str, str] = {}
        for rev in args.commits:
            commit, tree = _export(rev, Path(tmp))
            label = f"ours@{commit[:7]}"
            commits[label] = commit
            stacks[label] = _stack_of(tree)
        runs = measure(stacks, args.sessions, args.seconds, args.rounds)

    summary: dict[str, dict[int, dict[str, Any]]] = {}
    for name, per_level in runs.items():
        for n, results in per_level.items():
            summary.setdefault(name, {})[n] = {
                "steps_per_s": round(_median([x["steps_per_s"] for x in results])),
                "p50_us": round(_median([x["p50_us"] for x in results]), 1),
                "server_cpu_us_per_step": round(_median([x["server_cpu_us_per_step"] for x in results]), 1),
                "client_cpu_us_per_step": round(_median([x["client_cpu_us_per_step"] for x in results]), 1),
                "all_rounds_steps_per_s": [round(x["steps_per_s"]) for x in results],
            }
    ratios = {
        label: {
            n: round(summary[label][n]["steps_per_s"] / summary["upstream"][n]["steps_per_s"], 2) for n in args.sessions
        }
        for label in commits
    }
    report = {"commits": commits, "by_stack": summary, "ours_vs_upstream": ratios}
    loops: dict[str, dict[str, str | None]] = {
        name: {"client": _eventloop.LOOP, "server": _eventloop.LOOP} for name in stacks
    }
    if _results.publish(NAME, args, report, loops, upstream_python=args.upstream_python):
        return
    print(
        f"\n{'stack':16s} {'sessions':>8s} {'steps/s':>9s} {'vs upstream':>11s} {'server µs/step':>15s} {'client µs/step':>15s}"
    )
    for name, levels in summary.items():
        for n, row in levels.items():
            ratio = f"{ratios[name][n]:.2f}x" if name in ratios else ""
            print(
                f"{name:16s} {n:8d} {row['steps_per_s']:9d} {ratio:>11s} "
                f"{row['server_cpu_us_per_step']:15.1f} {row['client_cpu_us_per_step']:15.1f}"
            )


if __name__ == "__main__":
    entry(main)
