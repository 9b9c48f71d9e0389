"""How long the `openenv` command takes, ours and upstream's, side by side in one run.

    python benchmarks/cli_latency.py [--rounds 5] [--output PATH | --no-save] [--json]

Each command runs as a fresh process (what a user or a CI step pays), interleaved round by
round so machine noise hits both alike; the median is reported. Every command must succeed: each
runs once, untimed, before the rounds, and every timed run's exit status is checked as well; a
command that fails ends the benchmark with its output, never with a time.

- `--help`:            ours imports only the command table; upstream's imports its whole CLI.
- `validate <env>`:    both on the same copy of envs/echo_env. Upstream 0.3.0's validate also
                       requires a `uv.lock` and a `[project.scripts] server` entry point, so the
                       copy gets both before the rounds (untimed): `server = "echo_env.server.app:main"`
                       (that function exists) and the lock `uv lock` writes, openenv-hub resolved
                       from this checkout. Ours checks far more (every static check, the app
                       imported in a child Python); the time is still what a user waits.
- `validate <env> --level static` of upstream 0.10.0: RFC 008's static level, the same level as
                       ours' `validate <env>` (ours runs all ten static check ids there, upstream's one).
- `validate --url`:    both against the same server (`openenv serve` of that copy on a port from
                       the OS, polled on /health, running on uvloop): ours runs the runtime checks
                       with a live episode and 20 timed steps; upstream's checks its endpoint contract.

Each CLI runs as shipped, on its own default: ours' blocking client drives a uvloop loop in a
background thread; upstream's runtime validation uses `requests` (no event loop).
Results: benchmarks/results/cli_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import ROOT, UPSTREAM_ENV, BenchmarkError, entry, run_checked, serve, tail

NAME = "cli_latency"
OURS = Path(sys.executable).parent / "openenv"
UPSTREAM = ROOT / ".cache" / "upstream-venv" / "bin" / "openenv"
UPSTREAM_010 = ROOT / ".cache" / "upstream-venv-0.10.0" / "bin" / "openenv"
ENTRY_POINT = 'server = "echo_env.server.app:main"'


def prepare_env(work: Path) -> tuple[Path, dict[str, Any]]:
    """A copy of envs/echo_env that upstream 0.3.0's `openenv validate` accepts (see the module doc)."""
    env = work / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", env, ignore=shutil.ignore_patterns("__pycache__"))
    pyproject = env / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + f"\n[project.scripts]\n{ENTRY_POINT}\n"
        + f'\n[tool.uv.sources]\nopenenv-hub = {{ path = "{ROOT.as_posix()}" }}\n'
    )
    uv = Path(sys.executable).parent / "uv"
    uv_cmd = str(uv) if uv.exists() else shutil.which("uv")
    if uv_cmd is None:
        raise BenchmarkError(
            "no `uv` found (in this venv or on PATH) to write the copy's uv.lock: run `bash scripts/bootstrap`"
        )
    run_checked([uv_cmd, "lock", "--quiet"], what="`uv lock` for the copied echo_env", timeout=600, cwd=env)
    locked = (env / "uv.lock").read_text().count("[[package]]")
    return env, {
        "added_to_the_copy": [f"[project.scripts] {ENTRY_POINT}", f"uv.lock written by `uv lock` ({locked} packages)"]
    }


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if out.returncode != 0:
        raise BenchmarkError(f"`{' '.join(cmd)}` failed (exit {out.returncode}):\n{tail(out.stdout + out.stderr)}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    if not UPSTREAM.exists():
        raise BenchmarkError(f"no upstream CLI at {UPSTREAM}: run `bash scripts/upstream-venv` first")
    if not UPSTREAM_010.exists():
        raise BenchmarkError(f"no upstream 0.10.0 CLI at {UPSTREAM_010}: run `bash scripts/upstream-venv 0.10.0` first")
    _eventloop.require()
    ours_env = dict(os.environ)
    upstream_env = {**os.environ, **UPSTREAM_ENV}
    work = Path(tempfile.mkdtemp(prefix="openenv-cli-bench-"))
    try:
        env, prepared = prepare_env(work)
        cases: dict[str, tuple[list[str], dict[str, str]]] = {
            "ours --help": ([str(OURS), "--help"], ours_env),
            "upstream --help": ([str(UPSTREAM), "--help"], upstream_env),
            "ours validate echo_env": ([str(OURS), "validate", str(env)], ours_env),
            "upstream validate echo_env": ([str(UPSTREAM), "validate", str(env)], upstream_env),
            "upstream 0.10.0 validate --level static": (
                [str(UPSTREAM_010), "validate", str(env), "--level", "static"],
                upstream_env,
            ),
        }
        with serve([str(OURS), "serve", str(env), "--log-level", "warning"], cwd=work) as server:
            cases["ours validate --url"] = ([str(OURS), "validate", "--url", server.url], ours_env)
            cases["upstream validate --url"] = ([str(UPSTREAM), "validate", "--url", server.url], upstream_env)
            for cmd, cmd_env in cases.values():  # each must succeed before anything is timed
                _timed(cmd, work, cmd_env)
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, (cmd, cmd_env) in cases.items():
                    samples[name].append(_timed(cmd, work, cmd_env))
            server_loop = server.loop
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: round(statistics.median(values), 1) for name, values in samples.items()}
    loops: dict[str, dict[str, str | None]] = {
        "ours": {"client": _eventloop.LOOP, "server": server_loop},
        "upstream": {"client": None, "server": server_loop},
    }
    results = {"median_ms": medians, "all_ms": {k: [round(v, 1) for v in vs] for k, vs in samples.items()}, **prepared}
    doc = _results.save(NAME, args, results, loops, upstream_python=str(UPSTREAM.parent / "python"))
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"median wall time of a fresh `openenv` process, {args.rounds} rounds:")
    for name, ms in medians.items():
        print(f"  {name:<28} {ms:8.1f} ms")


if __name__ == "__main__":
    entry(main)
