"""What gVisor costs: echo_env's cold start and step latency under runc and under runsc, side by side.

    python benchmarks/sandbox_runtime.py [--rounds 5] [--steps 300] [--output PATH | --no-save] [--json]

One image (envs/echo_env with our runtime, on the local base image), started the way the Hub
starts code it did not write (`hub_service.sandbox.confined_provider`: uid 1000, no capabilities,
a read-only root, memory / CPU / process limits, the isolated smoke network) under each runtime,
interleaved round by round so machine noise hits both alike:

- `cold_start`: from the start call to the first `reset` reply (container start, server import,
  health poll, WebSocket connect, reset).
- `step`: one `step` round trip on an open session (p50 and p90 over the round's steps).

Each container's runtime is checked on the host (`observed_runtime`): a runsc round that did not
run on gVisor's kernel fails the run, and so does a client or server not on uvloop (the server's
loop is read inside the container). Needs root (the smoke network's firewall chain), Docker with
runsc registered (`bash scripts/docker-engine`). Results: benchmarks/results/sandbox_runtime.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import ROOT, BenchmarkError, entry

from openenv import GenericEnvClient
from openenv.images import build_image

NAME = "sandbox_runtime"
TAG = "openenv-bench/echo_env:sandbox-runtime"
RUNTIMES = ("runc", "runsc")


def _stats(samples: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 3),
        "p90_ms": round(ms[min(len(ms) - 1, int(0.9 * len(ms)))], 3),
    }


def server_loop(provider: Any) -> str:
    """The loop the container's server (its first process) runs on, read inside the container (its
    /proc/1/maps, which gVisor's kernel answers for under runsc): "uvloop" or "asyncio"."""
    out = provider.client.api.exec_create(provider.container_id, ["cat", "/proc/1/maps"])
    maps = provider.client.api.exec_start(out["Id"]).decode(errors="replace")
    if "python" not in maps:
        raise BenchmarkError(f"could not read the server's memory map in the container: {maps[-300:]}")
    return "uvloop" if "/uvloop/loop." in maps else "asyncio"


async def one_round(settings: Any, steps: int) -> tuple[float, list[float], bool | None, str, str]:
    """Start echo_env confined, reset, step `steps` times, stop. Returns the cold start (s), the
    step times (s), what the host saw of the runtime (gVisor or not), the client's loop and the server's."""
    from hub_service.sandbox import confined_provider

    provider = confined_provider(settings, TAG, startup_timeout_s=120)
    begun = time.perf_counter()
    try:
        url = await provider.astart()
        async with GenericEnvClient(url) as env:
            await env.reset()
            cold = time.perf_counter() - begun
            seen = provider.observed_runtime()
            times = []
            for i in range(steps):
                t = time.perf_counter()
                await env.step({"message": f"m{i}"})
                times.append(time.perf_counter() - t)
            loop = server_loop(provider)  # untimed
    finally:
        await provider.astop()
    return cold, times, seen.gvisor, _eventloop.running(), loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300, help="steps per round (one session)")
    parser.add_argument("--base-image", default=os.environ.get("OPENENV_TEST_BASE_IMAGE", "openenv-local/python:3.11"))
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    import docker

    from hub_service.settings import HubSettings

    client = docker.from_env()
    missing = [r for r in RUNTIMES if r not in (client.info().get("Runtimes") or {})]
    if missing:
        raise BenchmarkError(f"the Docker engine lacks {missing}: run `bash scripts/docker-engine`")
    build_image(ROOT / "envs" / "echo_env", TAG, base_image=args.base_image, client=client)
    cold: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    steps: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    loops: dict[str, dict[str, str | None]] = {}
    with tempfile.TemporaryDirectory() as data:
        for n in range(args.rounds):
            for runtime in RUNTIMES if n % 2 == 0 else reversed(RUNTIMES):
                settings = HubSettings(data_dir=Path(data), sandbox_runtime=runtime)
                c, t, gvisor, loop, server = _eventloop.run(one_round(settings, args.steps))
                if gvisor is not (runtime == "runsc"):
                    raise BenchmarkError(f"a {runtime} round ran on {'gVisor' if gvisor else 'the host kernel'}")
                cold[runtime].append(c)
                steps[runtime].extend(t)
                if loop != "uvloop" or server != "uvloop":
                    raise BenchmarkError(f"a {runtime} round ran its client on {loop} and its server on {server}")
                loops[runtime] = {"client": loop, "server": server}
                print(
                    f"round {n + 1} {runtime:5s} cold start {c:.2f} s, step p50 {_stats(t)['p50_ms']:.2f} ms",
                    file=sys.stderr,
                )
    results = {
        r: {"cold_start": {**_stats(cold[r]), "p50_s": round(statistics.median(cold[r]), 3)}, "step": _stats(steps[r])}
        for r in RUNTIMES
    }
    doc = _results.save(NAME, args, results, loops)
    if args.json:
        print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    entry(main)
