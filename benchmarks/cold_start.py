"""Cold start: seconds from the call to the first `reset` reply, side by side in one run.

    python benchmarks/cold_start.py [--rounds 5] [--pool-sizes 1,8,32] [--json]

Contestants, interleaved round by round so machine noise hits them alike (medians reported):

- upstream/upstream-image: openenv-core 0.3.0's `from_docker_image` (its own venv) on an
  upstream echo image (openenv-core 0.3.0 from PyPI on the local base image, served by uvicorn
  like upstream's Spaces).
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from openenv import GenericEnvClient  # noqa: E402
from openenv.client.pool import EnvPool  # noqa: E402
from openenv.client.providers import DockerProvider  # noqa: E402
from openenv.images import build_image  # noqa: E402

OUR_TAG = "openenv-bench/echo_env:cold-start"
UPSTREAM_TAG = "openenv-bench/upstream-echo:0.3.0"
_UPSTREAM_DOCKERFILE = """\
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
RUN pip install --no-cache-dir "openenv-core==0.3.0"
WORKDIR /app/env
COPY server_app.py /app/env/server_app.py
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "server_app:app", "--host", "0.0.0.0", "--port", "8000"]
"""


def _base_image() -> str:
    """The engine (scripts/docker-engine) and the base image this machine builds on (scripts/base-image)."""
    engine = subprocess.run(["bash", str(ROOT / "scripts" / "docker-engine")], capture_output=True, text=True)
    if engine.returncode != 0:
        raise SystemExit(f"cold_start: could not start Docker: {engine.stderr[-500:]}")
    out = subprocess.run(["bash", str(ROOT / "scripts" / "base-image")], capture_output=True, text=True)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not line:
        raise SystemExit(f"cold_start: no base image: {out.stderr[-500:]}")
    return line


def build_images(base: str) -> None:
    print(f"building {OUR_TAG} and {UPSTREAM_TAG} on {base} ...", file=sys.stderr)
    build_image(ROOT / "envs" / "echo_env", OUR_TAG, base_image=base)
    ctx = Path(tempfile.mkdtemp(prefix="openenv-bench-"))
    try:
        (ctx / "Dockerfile").write_text(_UPSTREAM_DOCKERFILE)
        shutil.copy(HERE / "_upstream_echo.py", ctx / "server_app.py")
        build_image(ctx, UPSTREAM_TAG, base_image=base, sdk="published")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


# -- contestants: each returns seconds from the call to the first reset reply ---------------------


def upstream_client(image: str, upstream_python: str) -> float:
    out = subprocess.run([upstream_python, str(HERE / "_upstream_cold_start.py"), image], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"upstream run failed: {out.stderr[-1500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


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


def floor(image: str) -> float:
    """`docker run` + a tight /health poll + one HTTP reset: no client library at all."""
    start = time.perf_counter()
    cid = subprocess.run(["docker", "run", "-d", "--label", "org.openenv.benchmark=cold_start", "-p", "127.0.0.1::8000", image],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        port = int(subprocess.run(["docker", "port", cid, "8000/tcp"], capture_output=True, text=True, check=True).stdout.split(":")[-1])
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.005)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/reset", body=b"{}", headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        return time.perf_counter() - start
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)


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
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage", f"/sys/fs/cgroup/cpu,cpuacct/docker/{cid}/cpuacct.usage"):
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
    provider = DockerProvider(image)
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


async def run(rounds: int, pool_sizes: list[int], upstream_python: str) -> dict[str, Any]:
    print("warming up (process venv, image caches) ...", file=sys.stderr)
    await our_process()
    await our_client(OUR_TAG)
    await our_client(UPSTREAM_TAG)
    contestants = {
        "upstream client, upstream image": lambda: asyncio.to_thread(upstream_client, UPSTREAM_TAG, upstream_python),
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
            pools.append({"size": size, "network": network, "seconds": elapsed, "bound_s": bound,
                          "ratio": elapsed / bound if bound else None, "machine_cpu_utilization": utilization})
            print(f"pool of {size} ({network} network): {elapsed:.2f}s", file=sys.stderr)
    return {"rounds": rounds, "cores": cores, "load_avg_1m_at_end": load, "medians_s": medians, "all_s": times, "one_start_cpu_s": cpu, "pools": pools}


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
    lines += [f"  N={p['size']:<3} {p['network']:<6} {p['seconds']:6.2f} s   bound {p['bound_s']:6.2f} s   ratio {p['ratio']:.2f} "
              f"(target <= 1.5)   machine CPU busy {p['machine_cpu_utilization']:.0%}" for p in result["pools"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pool-sizes", default="1,8,32")
    parser.add_argument("--upstream-python", default=None, help="python of the upstream venv (default: scripts/upstream-venv)")
    parser.add_argument("--skip-build", action="store_true", help="reuse the images of an earlier run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    upstream_python = args.upstream_python or subprocess.run(
        ["bash", str(ROOT / "scripts" / "upstream-venv")], capture_output=True, text=True, check=True).stdout.strip()
    base = _base_image()
    os.environ.setdefault("OPENENV_NAME_PREFIX", "openenv-bench")
    if not args.skip_build:
        build_images(base)
    result = asyncio.run(run(args.rounds, [int(s) for s in args.pool_sizes.split(",") if s], upstream_python))
    print(json.dumps(result, indent=1) if args.json else report(result))


if __name__ == "__main__":
    main()
