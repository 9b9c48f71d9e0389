"""One cold start with upstream openenv-core 0.3.0's `from_docker_image` (run with the upstream venv).

    <upstream python> benchmarks/_upstream_cold_start.py IMAGE

Prints the seconds from the call to the first `reset` reply. Upstream's LocalDockerProvider
publishes the container's port on every interface (`-p PORT:8000`); this machine's rule is
loopback only, so the one `docker run` command line it builds gets `127.0.0.1:` in front of the
port. Nothing else of upstream's path is changed (its `docker version` check, its fixed 1 s
sleep, its 0.5 s health polling, its client). It runs on uvloop, like every benchmark contestant.
"""

import json
import subprocess
import sys
import time

import _eventloop

_run = subprocess.run


def _loopback_run(cmd, *args, **kwargs):
    if isinstance(cmd, list) and cmd[:2] == ["docker", "run"]:
        cmd = [f"127.0.0.1:{arg}" if prev == "-p" else arg for prev, arg in zip([None, *cmd[:-1]], cmd, strict=True)]
    return _run(cmd, *args, **kwargs)


subprocess.run = _loopback_run

from openenv.core.generic_client import GenericEnvClient  # noqa: E402


async def main(image: str) -> None:
    start = time.perf_counter()
    client = await GenericEnvClient.from_docker_image(image)
    try:
        await client.reset()
        elapsed = time.perf_counter() - start
    finally:
        await client.close()
    print(json.dumps({"seconds": elapsed, "loop": _eventloop.running()}))


_eventloop.run(main(sys.argv[1]))
