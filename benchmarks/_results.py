"""Results files: every benchmark writes `benchmarks/results/<name>.json`, numbers and the machine.

One document per benchmark:

    {"benchmark": "step_throughput",
     "machine": {"cpu_model", "cores", "memory_gib", "os", "kernel", "python", "date", "duration_s",
                 "load_avg_1m": {"start", "end"}, "command", "settings",
                 "packages": {"ours": {"git_commit", "openenv-hub", "uvloop", ...},
                              "upstream": {"openenv-core", "uvloop", ...}},   # when upstream ran
                 "loop": "uvloop",
                 "event_loops": {CONTESTANT: {"client": LOOP | None, "server": LOOP | None}}},
     "results": {...}}

`event_loops` records, per contestant, the loop its client and its server ran on, as measured
(None: that side runs no asyncio loop, e.g. a blocking HTTP client or a command-line tool).
`benchmarks/tables.py` renders the README's tables from these files.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _eventloop

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_DIR = HERE / "results"

OURS_PACKAGES = (
    "openenv-hub",
    "uvloop",
    "uvicorn",
    "httptools",
    "websockets",
    "picows",
    "starlette",
    "fastapi",
    "pydantic",
    "orjson",
)
UPSTREAM_PACKAGES = ("openenv-core", "uvloop", "uvicorn", "httptools", "websockets", "starlette", "fastapi", "pydantic")
_PROBE = """import importlib.metadata as m, json, platform
out = {"python": platform.python_version()}
for name in %r:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))"""
_STARTED = (time.time(), os.getloadavg()[0])  # when the benchmark imported this module: its start


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """`--output PATH` (default benchmarks/results/NAME.json) and `--no-save`."""
    group = parser.add_argument_group("results")
    group.add_argument(
        "--output",
        type=Path,
        default=RESULTS_DIR / f"{name}.json",
        help=f"where the results document goes (default: benchmarks/results/{name}.json)",
    )
    group.add_argument(
        "--no-save", action="store_true", help="write no results file (test runs keep the published ones)"
    )


def _first(path: str, key: str, sep: str = ":") -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(sep, 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def _git() -> dict[str, Any]:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode != 0:
        return {"git_commit": None, "git_note": "not a git checkout"}
    status = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {"git_commit": head.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


def packages(upstream_python: str | None) -> dict[str, dict[str, Any]]:
    """Versions of what each contestant runs: ours (this venv, its git commit) and upstream's venv."""
    ours: dict[str, Any] = {**_git(), "python": platform.python_version()}
    for name in OURS_PACKAGES:
        try:
            ours[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            ours[name] = None
    found = {"ours": ours}
    if upstream_python:
        out = subprocess.run(
            [upstream_python, "-c", _PROBE % (UPSTREAM_PACKAGES,)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        found["upstream"] = {"python_path": upstream_python, **json.loads(out.stdout)}
    return found


def machine(
    settings: dict[str, Any], event_loops: dict[str, dict[str, str | None]], upstream_python: str | None
) -> dict[str, Any]:
    """The machine, the software and the settings one run of a benchmark used."""
    mem_kb = _first("/proc/meminfo", "MemTotal")
    started, load_start = _STARTED
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    return {
        "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "memory_gib": round(int(mem_kb.split()[0]) / 2**20, 1) if mem_kb else None,
        "os": _first("/etc/os-release", "PRETTY_NAME", "=") or platform.system(),
        "kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": round(time.time() - started, 1),
        "load_avg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "command": shlex.join(["python", os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
        "settings": settings,
        "packages": packages(upstream_python),
        "loop": _eventloop.LOOP,
        "event_loops": event_loops,
    }


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """A benchmark's arguments as JSON values, less where its output goes."""
    skip = {"output", "no_save", "json"}
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in skip}


def save(
    name: str,
    args: argparse.Namespace,
    results: dict[str, Any],
    event_loops: dict[str, dict[str, str | None]],
    *,
    upstream_python: str | None = None,
) -> dict[str, Any]:
    """Build the results document; write it to `args.output` unless `--no-save`. Returns it."""
    doc = {"benchmark": name, "machine": machine(settings_of(args), event_loops, upstream_python), "results": results}
    if not args.no_save:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"results written to {args.output}", file=sys.stderr)
    return doc


def publish(
    name: str,
    args: argparse.Namespace,
    results: dict[str, Any],
    event_loops: dict[str, dict[str, str | None]],
    *,
    upstream_python: str | None = None,
) -> bool:
    """`save` the results; under `--json` also print the document. True when it was printed (the
    caller's text report is then not wanted)."""
    doc = save(name, args, results, event_loops, upstream_python=upstream_python)
    if args.json:
        print(json.dumps(doc, indent=2))
    return bool(args.json)


def load(name: str, directory: Path = RESULTS_DIR) -> dict[str, Any] | None:
    """The results document of benchmark `name`, or None when it has not been run."""
    path = directory / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None
