"""Building the env images once per test run, concurrently, and running containers of them."""

from __future__ import annotations

import contextlib
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from openenv.images import BuildResult, build_image
from tests.support.servers import ROOT
from tests.support.systems import require_system

ENV_NAMES = ("atari_env", "blackjack_env", "chess_env", "coding_env", "grid_world_env", "wordle_env")
TAG_PREFIX = "envs-test/"
# One tag per test run: several runs may share the engine (worktrees, CI on a busy machine), and
# each removes its own images at the end.
RUN_TAG = f"run-{uuid.uuid4().hex[:10]}"
CONTAINER_PREFIX = "envs-test-"
LABEL = "org.openenv.test-owner"


def docker_client() -> Any:
    """A connected Docker client, or a skip with the reason (Docker is an optional system)."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:
        require_system("Docker", f"no Docker engine reachable ({exc}); `bash scripts/test` starts one")
    return client


class EnvImages:
    """Builds every env image in parallel on first use; `tag(name)` waits for one of them."""

    def __init__(self, client: Any, base_image: str) -> None:
        self.client = client
        self.base_image = base_image
        self._pool = ThreadPoolExecutor(3, thread_name_prefix="envs-build")
        self._builds: dict[str, Future[BuildResult]] = {}

    def _start(self) -> None:
        if not self._builds:
            for name in ENV_NAMES:
                self._builds[name] = self._pool.submit(
                    build_image,
                    ROOT / "envs" / name,
                    f"{TAG_PREFIX}{name}:{RUN_TAG}",
                    base_image=self.base_image,
                    labels={LABEL: "envs"},
                    client=self.client,
                )

    def tag(self, name: str) -> str:
        """The built image's tag (raises the build's error, with its log tail, if it failed)."""
        self._start()
        result = self._builds[name].result(timeout=1500)
        return result.tag

    @contextlib.contextmanager
    def run(self, name: str, environment: dict[str, str] | None = None, user: str | None = None) -> Iterator[str]:
        """Run a container of the env with port 8000 published on 127.0.0.1; yields its URL."""
        tag = self.tag(name)
        container = self.client.containers.run(
            tag,
            detach=True,
            name=f"{CONTAINER_PREFIX}{name.replace('_', '-')}-{uuid.uuid4().hex[:8]}",
            ports={"8000/tcp": ("127.0.0.1", None)},
            environment=environment or {},
            labels={LABEL: "envs"},
            user=user or "",
        )
        try:
            container.reload()
            port = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(url, container)
            yield url
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)

    def remove_all(self) -> None:
        self._pool.shutdown(wait=True)
        for future in self._builds.values():
            if future.done() and future.exception() is None:
                with contextlib.suppress(Exception):
                    self.client.images.remove(future.result().tag, force=True)


def _wait_healthy(url: str, container: Any, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        container.reload()
        if container.status == "exited":
            raise RuntimeError(f"container exited: {container.logs(tail=40).decode(errors='replace')}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url}/health not healthy in {timeout_s}s: {container.logs(tail=40).decode(errors='replace')}")
