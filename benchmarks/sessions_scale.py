"""Sessions per server: N concurrent sessions on one server, side by side in one run, in two parts.

    python benchmarks/sessions_scale.py [--sizes 256 1024 4096 16000] [--client-sizes 1024 16000]
                                        [--steps 20] [--cap 300] [--rounds 3] [--output PATH | --no-save] [--json]

Servers: one neutral driver (`_scale_drivers.py neutral`: raw protocol frames over picows, the
same connect pacing and timeouts for every server: 256 handshakes in flight, 10 s each from its
own start, 60 s per reply) against each server:

- upstream:       openenv-core 0.3.0's create_app (`_upstream_scale.py`) on uvicorn with its
                  defaults (h11, per-message compression on, a backlog of 2,048) but for the loop;
- upstream_equal: the same app on our transport settings (httptools, sans-I/O websockets, no
                  compression, our backlog);
- ours:           envs/echo_env on `python -m openenv.server`.

Clients: each client as a user gets it, against the same server (ours): our `EnvClient` (typed;
it queues its handshakes 256 at a time, the queued time not counted against its 10 s connect
timeout) and upstream's `EnvClient` (in its own venv; it opens every connection at once).

For each N and contestant: a fresh server with capacity for the largest N, and a driver in another
process that opens N sessions at once; once every connect has finished, each session does a reset
and `--steps` steps, all at the same time, then closes. Measured: success rate (sessions whose
reset and steps all answered), connect time (p50 of a handshake, and until the last connect
finished), steps/s over the stepping phase, step latency (p50, p99), and the server's peak RSS and
CPU time. A run still going after `--cap` seconds is cut off and its unfinished sessions count as
failed. N up to 1,024 runs `--rounds` times, the contestants interleaved round by round (the median
by steps/s is kept); larger N once. Every client and server runs on uvloop, with its open-files
limit raised to the hard one. Results: benchmarks/results/sessions_scale.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import (
    HERE,
    UPSTREAM_ENV,
    BenchmarkError,
    add_upstream_argument,
    describe_stacks,
    entry,
    json_line,
    ours_stack,
    require_upstream,
    run_checked,
    serve,
    upstream_stack,
)
from _scale_drivers import raise_open_files

NAME = "sessions_scale"
SMALL = 1024  # sizes up to this run --rounds times


def contests(upstream_python: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The two parts: servers under one neutral driver, and clients against one server (ours)."""
    neutral = (sys.executable, "neutral")
    ours = ours_stack("echo_env")
    return {
        "servers": {
            "upstream": {**upstream_stack(upstream_python, "_upstream_scale"), "client": neutral},
            "upstream_equal": {
                **upstream_stack(upstream_python, "_upstream_scale", transport="ours"),
                "client": neutral,
            },
            "ours": {**ours, "client": neutral},
        },
        "clients": {
            "ours": ours,
            "upstream": {**ours, "client": (upstream_python, "upstream")},
        },
    }


def _server_usage(pid: int) -> tuple[float, tuple[float, float]]:
    """Peak RSS (MiB) of a server process, and its CPU seconds so far two ways: the kernel's tick
    counts (every thread, gone ones too, in 10 ms steps: a light run can read 0) and its threads'
    scheduler times (to the nanosecond, threads still alive only). `_cpu_between` takes the larger."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    scheduled = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            scheduled += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return int(status["VmHWM"].split()[0]) / 1024, (ticks, scheduled / 1e9)


def _cpu_between(before: tuple[float, float], after: tuple[float, float]) -> float:
    """CPU seconds between two readings: each way is a lower bound, so the larger one."""
    return max(after[0] - before[0], after[1] - before[1])


def measure(name: str, spec: dict[str, Any], n: int, args: argparse.Namespace, capacity: int) -> dict[str, Any]:
    """One run: a fresh server, the driver at `n` sessions, the server's peak RSS and CPU time."""
    python, kind = spec["client"]
    server_env = {**spec["env"], "OPENENV_MAX_SESSIONS": str(capacity), "SCALE_MAX_SESSIONS": str(capacity)}
    with serve(spec["server"], spec["cwd"], server_env) as srv:
        _, cpu0 = _server_usage(srv.pid)
        env = {**os.environ, **(UPSTREAM_ENV if kind == "upstream" else {})}
        out = run_checked(
            [python, str(HERE / "_scale_drivers.py"), kind, srv.url, str(n), str(args.steps), str(args.cap)],
            what=f"the {name} driver at {n} sessions",
            timeout=args.cap + 120,
            cwd=HERE,
            env=env,
        )
        result = json_line(out, f"the {name} driver")
        if result["loop"] != _eventloop.LOOP:
            raise BenchmarkError(f"the {name} driver ran on {result['loop']}, not {_eventloop.LOOP}")
        rss, cpu1 = _server_usage(srv.pid)
        result["server_peak_rss_mb"] = round(rss, 1)
        result["server_cpu_s"] = round(_cpu_between(cpu0, cpu1), 3)
        result["server_loop"] = srv.loop
    return result


def _describe(r: dict[str, Any]) -> str:
    return (
        f"{r['success_rate']:7.2%} ok  connect p50 {r['connect_p50_ms'] or 0:7.0f} ms  {r['steps_per_s']:7d} steps/s  "
        f"p99 {r['p99_ms'] or 0:8.1f} ms  RSS {r['server_peak_rss_mb']:6.0f} MiB"
        + (f"  failures {r['failures']}" if r["failures"] else "")
    )


def run_part(
    part: dict[str, dict[str, Any]], sizes: list[int], args: argparse.Namespace, capacity: int, label: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str | None]]]:
    """Each contestant at each size, interleaved round by round; the median round by steps/s."""
    loops: dict[str, dict[str, str | None]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for n in sizes:
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in part}
        for r in range(args.rounds if n <= SMALL else 1):  # interleaved: machine noise hits all alike
            for name, spec in part.items():
                res = measure(name, spec, n, args, capacity)
                loops[f"{label}: {name}"] = {"client": res.pop("loop"), "server": res.pop("server_loop")}
                results[name].append(res)
                print(f"  {label} {n:6d} sessions {name:15s} round {r + 1}: {_describe(res)}", file=sys.stderr)
        for name, found in results.items():
            best = sorted(found, key=lambda x: x["steps_per_s"])[len(found) // 2]  # the median round
            best["all_rounds_steps_per_s"] = [x["steps_per_s"] for x in found]
            runs.setdefault(name, {})[str(n)] = best
    return runs, loops


def _ratio(ours: dict[str, Any], other: dict[str, Any]) -> float | None:
    """ours / other in steps/s; None where the other made no step."""
    return round(ours["steps_per_s"] / other["steps_per_s"], 2) if other["steps_per_s"] else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096, 16000], help="servers: sessions")
    parser.add_argument("--client-sizes", type=int, nargs="+", default=[1024, 16000], help="clients: sessions")
    parser.add_argument("--steps", type=int, default=20, help="steps per session after its reset")
    parser.add_argument("--cap", type=float, default=300.0, help="seconds a run may take before it is cut off")
    parser.add_argument("--rounds", type=int, default=3, help=f"rounds for sizes up to {SMALL:,} (larger: one)")
    add_upstream_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    sizes = args.sizes + args.client_sizes
    if min(sizes) < 1 or args.steps < 1 or args.cap <= 0 or args.rounds < 1:
        parser.error("--sizes, --client-sizes and --steps must be >= 1, --cap > 0 and --rounds >= 1")
    require_upstream(args.upstream_python)
    open_files = raise_open_files()  # the servers started below inherit it
    if open_files < max(sizes) + 100:
        raise BenchmarkError(
            f"this process may hold {open_files} open files, too few for {max(sizes)} sessions: "
            f"raise the hard limit (`ulimit -Hn`) or lower --sizes"
        )

    parts = contests(args.upstream_python)
    capacity = max(sizes) + 16
    servers, loops = run_part(parts["servers"], args.sizes, args, capacity, "servers")
    clients, client_loops = run_part(parts["clients"], args.client_sizes, args, capacity, "clients")
    loops.update(client_loops)
    report = {
        "servers": servers,
        "clients": clients,
        "ratios": {
            "servers": {
                str(n): {
                    "ours_vs_upstream": _ratio(servers["ours"][str(n)], servers["upstream"][str(n)]),
                    "ours_vs_upstream_equal": _ratio(servers["ours"][str(n)], servers["upstream_equal"][str(n)]),
                }
                for n in args.sizes
            },
            "clients": {
                str(n): {"ours_vs_upstream": _ratio(clients["ours"][str(n)], clients["upstream"][str(n)])}
                for n in args.client_sizes
            },
        },
        "open_files_limit": open_files,
        "stacks": {part: describe_stacks(specs, args.upstream_python) for part, specs in parts.items()},
    }
    if _results.publish(NAME, args, report, loops, upstream_python=args.upstream_python):
        return
    print(
        f"\nsessions per server ({os.cpu_count()} cores, reset + {args.steps} steps per session, all on {_eventloop.LOOP})"
    )
    for title, runs, part_sizes in (
        ("servers, one neutral driver", servers, args.sizes),
        ("clients, our server", clients, args.client_sizes),
    ):
        print(f"\n{title}")
        print(
            f"{'sessions':>8s} {'contestant':15s} {'success':>8s} {'conn p50':>9s} {'conn all':>9s} {'steps/s':>8s} "
            f"{'p50 ms':>8s} {'p99 ms':>8s} {'RSS MiB':>8s}"
        )
        for n in part_sizes:
            for name, per_size in runs.items():
                r = per_size[str(n)]
                print(
                    f"{n:8d} {name:15s} {r['success_rate']:8.1%} {r['connect_p50_ms'] or 0:9.0f} {r['connect_all_s']:9.1f} "
                    f"{r['steps_per_s']:8d} {r['p50_ms'] or 0:8.1f} {r['p99_ms'] or 0:8.1f} {r['server_peak_rss_mb']:8.0f}"
                )


if __name__ == "__main__":
    entry(main)
