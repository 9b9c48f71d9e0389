"""Cold start: seconds from the call to the first `reset` reply, side by side in one run.

    python benchmarks/cold_start.py [--rounds 5] [--pool-sizes 1,8,32] [--output PATH | --no-save] [--json]

Contestants, interleaved round by round so machine noise hits them alike (medians reported):

- upstream/upstream-image: openenv-core 0.3.0's `from_docker_image` (its own venv) on an
  upstream echo image (openenv-core 0.3.0 from PyPI on the local base image, served by uvicorn
  like upstream's Spaces, plus the uvloop version our image has, with `--loop uvloop`).
- ours/our-image:          `EnvClient.from_docker_image` on envs/echo_env built with our runtime
  on the same base image.
- ours/upstream-image:     our client on upstream's image.
- floor/<image>:           `docker run -d` + a /health poll every 5 ms, no client library, then
  one reset over HTTP; the least any client can take on that image.
- ours/process:            `EnvClient.from_process(envs/echo_env)` with the env's venv cached.

Then pools: `EnvPool.docker(our image, N).start()` for each N, with the default bridge network
(port published on 127.0.0.1) and with `network="host"` (opt-in: no port proxy or NAT rules, but
the container shares the host's network), next to the machine's bound:
the CPU time one start costs the whole machine (all processes, from /proc/stat) x N / cores.
Needs Docker (scripts/test starts it) and the upstream venv (scripts/upstream-venv).

Every client and every server runs on uvloop (`_eventloop.LOOP`): checked during the warm-up in
each server process (the container's, the env's venv's) and reported by each client; any other
loop, and any command that fails, fails the run. Results: benchmarks/results/cold_start.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import HERE, ROOT, UPSTREAM_ENV, BenchmarkError, entry, json_line, require_loop, run_checked, tail

from openenv import GenericEnvClient
from openenv.client.pool import EnvPool
from openenv.client.providers import ContainerProvider
from openenv.images import build_image

NAME = "cold_start"
OUR_TAG = "openenv-bench/echo_env:cold-start"
UPSTREAM_TAG = "openenv-bench/upstream-echo:0.3.0"
_UPSTREAM_DOCKERFILE = """\
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
ARG UVLOOP_VERSION
RUN pip install --no-cache-dir "openenv-core==0.3.0" "uvloop==${UVLOOP_VERSION}"
WORKDIR /app/env
COPY server_app.py /app/env/server_app.py
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "server_app:app", "--loop", "uvloop", "--host", "0.0.0.0", "--port", "8000"]
"""


def _base_image() -> str:
    """The engine (scripts/docker-engine) and the base image this machine builds on (scripts/base-image)."""
    run_checked(
        ["bash", str(ROOT / "scripts" / "docker-engine")], what="starting Docker (scripts/docker-engine)", timeout=600
    )
    out = run_checked(
        ["bash", str(ROOT / "scripts" / "base-image")], what="the base image (scripts/base-image)", timeout=3600
    )
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if not line:
        raise BenchmarkError(f"scripts/base-image named no image:\n{tail(out.stderr)}")
    return line


def image_uvloop(image: str) -> str:
    """The uvloop version installed in `image` (fails when it has none: its server would run on asyncio)."""
    code = "import importlib.metadata as m, uvloop; print(m.version('uvloop'))"
    out = run_checked(
        ["docker", "run", "--rm", "--entrypoint", "python", image, "-c", code],
        what=f"{_eventloop.LOOP} in the image {image}",
        timeout=120,
    )
    return out.stdout.strip()


def build_images(base: str) -> None:
    print(f"building {OUR_TAG} and {UPSTREAM_TAG} on {base} ...", file=sys.stderr)
    build_image(ROOT / "envs" / "echo_env", OUR_TAG, base_image=base)
    ctx = Path(tempfile.mkdtemp(prefix="openenv-bench-"))
    try:
        (ctx / "Dockerfile").write_text(_UPSTREAM_DOCKERFILE)
        shutil.copy(HERE / "_upstream_echo.py", ctx / "server_app.py")
        # the same uvloop as our image's, so that both servers run on the same loop
        build_image(
            ctx, UPSTREAM_TAG, base_image=base, sdk="published", build_args={"UVLOOP_VERSION": image_uvloop(OUR_TAG)}
        )
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


# -- contestants: each returns seconds from the call to the first reset reply ---------------------


def upstream_client(image: str, upstream_python: str) -> tuple[float, str]:
    """(seconds, the client's loop) of one cold start with upstream's client, in its venv."""
    out = run_checked(
        [upstream_python, str(HERE / "_upstream_cold_start.py"), image],
        what="upstream's cold start",
        timeout=300,
        env={**os.environ, **UPSTREAM_ENV},
    )
    result = json_line(out, "upstream's cold start")
    return float(result["seconds"]), result["loop"]


async def our_client(image: str) -> float:
    start = time.perf_counter()
    env = await GenericEnvClient.from_docker_image(image)
    try:
        await env.reset()
        return time.perf_counter() - start
    finally:
        await env.close()


async def our_process() -> float:
    start = time.perf_counter()
    env = await GenericEnvClient.from_process(ROOT / "envs" / "echo_env")
    try:
        await env.reset()
        return time.perf_counter() - start
    finally:
        await env.close()


async def server_loop(launch: Any) -> str:
    """Start a server with `launch` (untimed), and read the loop its process runs on."""
    env = await launch
    try:
        await env.reset()
        provider = env.provider
        if getattr(provider, "proc", None) is not None:
            pid = provider.proc.pid
        else:
            out = run_checked(
                ["docker", "inspect", "-f", "{{.State.Pid}}", provider.container_id], what="docker inspect", timeout=60
            )
            pid = int(out.stdout.strip())
        return _eventloop.of_process(pid)
    finally:
        await env.close()


def floor(image: str, timeout_s: float = 120.0) -> float:
    """`docker run` + a tight /health poll + one HTTP reset: no client library at all."""
    start = time.perf_counter()
    cid = run_checked(
        ["docker", "run", "-d", "--label", "org.openenv.benchmark=cold_start", "-p", "127.0.0.1::8000", image],
        what="docker run",
        timeout=300,
    ).stdout.strip()
    try:
        port = int(
            run_checked(["docker", "port", cid, "8000/tcp"], what="docker port", timeout=60).stdout.split(":")[-1]
        )
        deadline = start + timeout_s
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.perf_counter() > deadline:
                logs = run_checked(["docker", "logs", cid], what="docker logs", timeout=60)
                raise BenchmarkError(
                    f"{image} did not answer /health within {timeout_s:g} s:\n{tail(logs.stdout + logs.stderr)}"
                )
            time.sleep(0.005)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/reset", body=b"{}", headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        if reply.status != 200:
            raise BenchmarkError(f"POST /reset on {image} answered {reply.status}")
        return time.perf_counter() - start
    finally:
        run_checked(["docker", "rm", "-f", cid], what="docker rm", timeout=120)


# -- pools ------------------------------------------------------------------------------------------


_ENGINE = {"dockerd", "containerd"}
_PER_START = {"docker-proxy", "runc", "containerd-shim", "containerd-shim-runc-v2"}


def _proc_cpu(pid: str) -> tuple[str, float]:
    """(command name, CPU seconds incl. reaped children) of a process; ("", 0) when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return "", 0.0
    name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode(errors="replace")
    fields = stat[stat.rfind(b")") + 2 :].split()
    return name, sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _engine_cpu() -> dict[str, tuple[str, float]]:
    return {pid: _proc_cpu(pid) for pid in os.listdir("/proc") if pid.isdigit()}


def _container_cpu(cid: str) -> float:
    """CPU seconds the container's own processes used (its cgroup's counter, v1 or v2)."""
    for path in (
        f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage",
        f"/sys/fs/cgroup/cpu,cpuacct/docker/{cid}/cpuacct.usage",
    ):
        with contextlib.suppress(OSError, ValueError):
            return int(Path(path).read_text()) / 1e9
    for path in (f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat", f"/sys/fs/cgroup/docker/{cid}/cpu.stat"):
        with contextlib.suppress(OSError, ValueError):
            usage = next(line for line in Path(path).read_text().splitlines() if line.startswith("usage_usec"))
            return int(usage.split()[1]) / 1e6
    raise RuntimeError(f"no CPU counter found for container {cid[:12]}")


async def one_start_cpu(image: str) -> float:
    """CPU seconds one container start costs: this client, the engine (dockerd, containerd), the
    per-container helpers (shim, runc, port proxy), and the container's own processes. Counted
    per process, so that other work on a shared machine does not inflate the bound."""
    before = _engine_cpu()
    me = resource.getrusage(resource.RUSAGE_SELF)
    provider = ContainerProvider(image)
    await provider.astart()
    after = _engine_cpu()
    mine = resource.getrusage(resource.RUSAGE_SELF)
    used = (mine.ru_utime - me.ru_utime) + (mine.ru_stime - me.ru_stime) + _container_cpu(provider.container_id or "")
    for pid, (name, cpu) in after.items():
        if name in _ENGINE:
            used += cpu - before.get(pid, (name, cpu))[1]
        elif name in _PER_START and pid not in before:
            used += cpu
    await provider.astop()
    return used


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all processes and the kernel, /proc/stat)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:9]]
    return (sum(parts) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")


async def pool_start(image: str, size: int, network: str) -> tuple[float, float]:
    """(seconds to start `size` containers, the machine's CPU utilization meanwhile)."""
    pool = EnvPool.docker(image, size, network=network)
    busy = _machine_busy_s()
    start = time.perf_counter()
    await pool.start()
    elapsed = time.perf_counter() - start
    busy = _machine_busy_s() - busy
    await pool.close()
    return elapsed, busy / (elapsed * (os.cpu_count() or 1))


# -- the run ------------------------------------------------------------------------------------------


async def run(
    rounds: int, pool_sizes: list[int], upstream_python: str, loops: dict[str, dict[str, str | None]]
) -> dict[str, Any]:
    print("warming up (process venv, image caches) and reading each server's loop ...", file=sys.stderr)
    servers = {
        "process": await server_loop(GenericEnvClient.from_process(ROOT / "envs" / "echo_env")),
        "our image": await server_loop(GenericEnvClient.from_docker_image(OUR_TAG)),
        "upstream image": await server_loop(GenericEnvClient.from_docker_image(UPSTREAM_TAG)),
    }
    for name, loop in servers.items():
        if loop != _eventloop.LOOP:
            raise BenchmarkError(f"the server of the {name} runs on {loop}, not {_eventloop.LOOP}")
    _, upstream_loop = await asyncio.to_thread(upstream_client, UPSTREAM_TAG, upstream_python)
    if upstream_loop != _eventloop.LOOP:
        raise BenchmarkError(f"upstream's client ran on {upstream_loop}, not {_eventloop.LOOP}")
    ours = _eventloop.running()
    loops.update(
        {
            "upstream client, upstream image": {"client": upstream_loop, "server": servers["upstream image"]},
            "ours, our image": {"client": ours, "server": servers["our image"]},
            "ours, upstream image": {"client": ours, "server": servers["upstream image"]},
            "floor, our image": {"client": None, "server": servers["our image"]},
            "floor, upstream image": {"client": None, "server": servers["upstream image"]},
            "ours, process (venv cached)": {"client": ours, "server": servers["process"]},
        }
    )

    async def upstream_seconds() -> float:
        return (await asyncio.to_thread(upstream_client, UPSTREAM_TAG, upstream_python))[0]

    contestants = {
        "upstream client, upstream image": upstream_seconds,
        "ours, our image": lambda: our_client(OUR_TAG),
        "ours, upstream image": lambda: our_client(UPSTREAM_TAG),
        "floor, our image": lambda: asyncio.to_thread(floor, OUR_TAG),
        "floor, upstream image": lambda: asyncio.to_thread(floor, UPSTREAM_TAG),
        "ours, process (venv cached)": our_process,
    }
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for r in range(rounds):
        for name, make in contestants.items():
            times[name].append(await make())
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    medians = {name: statistics.median(v) for name, v in times.items()}
    load = os.getloadavg()[0]
    cpu = statistics.median([await one_start_cpu(OUR_TAG) for _ in range(5)])
    cores = os.cpu_count() or 1
    pools = []
    for size in pool_sizes:
        for network in ("bridge", "host"):
            elapsed, utilization = await pool_start(OUR_TAG, size, network)
            bound = cpu * size / cores
            pools.append(
                {
                    "size": size,
                    "network": network,
                    "seconds": elapsed,
                    "bound_s": bound,
                    "ratio": elapsed / bound if bound else None,
                    "machine_cpu_utilization": utilization,
                }
            )
            print(f"pool of {size} ({network} network): {elapsed:.2f}s", file=sys.stderr)
    return {
        "rounds": rounds,
        "cores": cores,
        "load_avg_1m_at_end": load,
        "medians_s": medians,
        "all_s": times,
        "one_start_cpu_s": cpu,
        "pools": pools,
    }


def report(result: dict[str, Any]) -> str:
    m = result["medians_s"]
    lines = [f"cold start, call → first reset reply (median of {result['rounds']} rounds)", ""]
    lines += [f"  {name:<34} {sec:6.2f} s" for name, sec in m.items()]
    up = m["upstream client, upstream image"]
    ours = m["ours, our image"]
    rounds = result["all_s"]

    def paired(a: str, b: str) -> float:
        # per-round difference, then the median: the machine's noise hits both alike within a round
        return statistics.median(x - y for x, y in zip(rounds[a], rounds[b], strict=True))

    lines += [
        "",
        f"  ours on our image vs upstream on its image: {ours / up:.0%}   (target <= 50%)",
        f"  our client over the floor, our image:       {paired('ours, our image', 'floor, our image'):+.2f} s (median of per-round differences; target <= +0.2 s)",
        f"  our client over the floor, upstream image:  {paired('ours, upstream image', 'floor, upstream image'):+.2f} s (target <= +0.2 s)",
        f"  upstream client over the floor, its image:  {paired('upstream client, upstream image', 'floor, upstream image'):+.2f} s",
        f"  (1-minute load average at the end: {result['load_avg_1m_at_end']:.1f} on {result['cores']} cores)",
        "",
        f"pools of containers (our image), bound = {result['one_start_cpu_s']:.2f} CPU-s per start x N / {result['cores']} cores",
    ]
    lines += [
        f"  N={p['size']:<3} {p['network']:<6} {p['seconds']:6.2f} s   bound {p['bound_s']:6.2f} s   ratio {p['ratio']:.2f} "
        f"(target <= 1.5)   machine CPU busy {p['machine_cpu_utilization']:.0%}"
        for p in result["pools"]
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pool-sizes", default="1,8,32")
    parser.add_argument(
        "--upstream-python", default=None, help="python of the upstream venv (default: scripts/upstream-venv)"
    )
    parser.add_argument("--skip-build", action="store_true", help="reuse the images of an earlier run")
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    upstream_python = (
        args.upstream_python
        or run_checked(
            ["bash", str(ROOT / "scripts" / "upstream-venv")], what="scripts/upstream-venv", timeout=600
        ).stdout.strip()
    )
    _eventloop.require()
    require_loop(upstream_python)
    base = _base_image()
    os.environ.setdefault("OPENENV_NAME_PREFIX", "openenv-bench")
    if not args.skip_build:
        build_images(base)
    loops: dict[str, dict[str, str | None]] = {}
    result = _eventloop.run(run(args.rounds, [int(s) for s in args.pool_sizes.split(",") if s], upstream_python, loops))
    result["images"] = {
        "base": base,
        "ours": OUR_TAG,
        "upstream": UPSTREAM_TAG,
        "uvloop": {"our image": image_uvloop(OUR_TAG), "upstream image": image_uvloop(UPSTREAM_TAG)},
    }
    doc = _results.save(NAME, args, result, loops, upstream_python=upstream_python)
    print(json.dumps(doc, indent=1) if args.json else report(result))


if __name__ == "__main__":
    entry(main)
