"""How long the `openenv` command takes, ours and upstream's, side by side in one run.

    python benchmarks/cli_latency.py [--rounds 5] [--json]

Each command runs as a fresh process (what a user or a CI step pays), interleaved round by
round so machine noise hits both alike; the median is reported.

- `--help`:            ours imports only the command table; upstream's imports its whole CLI.
- `validate <env>`:    ours: every static check incl. importing the app in a child Python;
                       upstream: its `openenv validate` on the same folder (what it checks is
                       far less; the time is still what a user waits).
- `validate --url`:    ours only (upstream has no runtime validation): the runtime checks
                       against envs/echo_env served locally, 20 timed steps included.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = Path(sys.executable).parent / "openenv"
UPSTREAM = ROOT / ".cache" / "upstream-venv" / "bin" / "openenv"


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=300)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="openenv-cli-bench-"))
    env = work / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", env, ignore=shutil.ignore_patterns("__pycache__"))
    cases: dict[str, list[str]] = {
        "ours --help": [str(OURS), "--help"],
        "ours validate echo_env": [str(OURS), "validate", str(env)],
    }
    if UPSTREAM.exists():
        cases["upstream --help"] = [str(UPSTREAM), "--help"]
        cases["upstream validate echo_env"] = [str(UPSTREAM), "validate", str(env)]
    server = subprocess.Popen([str(OURS), "serve", str(env), "--port", "8799", "--log-level", "warning"], cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2.0)
        cases["ours validate --url"] = [str(OURS), "validate", "--url", "http://127.0.0.1:8799"]
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, cmd in cases.items():
                samples[name].append(_time(cmd, work))
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    result = {name: round(statistics.median(values), 1) for name, values in samples.items()}
    if args.json:
        print(json.dumps({"median_ms": result, "rounds": args.rounds}, indent=2))
        return
    print(f"median wall time of a fresh `openenv` process, {args.rounds} rounds:")
    for name, ms in result.items():
        print(f"  {name:<28} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
