"""The OCI registry (scripts/registry) and the second Docker engine (scripts/docker-engine2) of the tests.

`scripts/systems` starts both and prints OPENENV_TEST_REGISTRY(_USER, _PASSWORD) and
OPENENV_TEST_DOCKER2_HOST; a test that needs one and does not find it skips (fails under CI).
`private_registry` starts a registry of a test's own (same script, its own folder and port), which
the test may stop and start at will without disturbing anyone else's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import ROOT, free_port
from tests.support.systems import require_system

__all__ = ["Registry", "engine2", "manifest_digest", "private_registry", "test_registry"]

# Manifests the Docker engine 20.10 pushes; the registry answers HEAD/GET with the digest of what it stores.
_ACCEPT = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    )
)


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:<port>
    user: str
    password: str

    @property
    def auth(self) -> dict[str, str]:
        return {"username": self.user, "password": self.password}


def test_registry() -> Registry:
    """The registry scripts/systems started (skip, or fail under CI, when it is not there)."""
    host = os.environ.get("OPENENV_TEST_REGISTRY")
    user, password = os.environ.get("OPENENV_TEST_REGISTRY_USER"), os.environ.get("OPENENV_TEST_REGISTRY_PASSWORD")
    if not (host and user and password):
        require_system(
            "OCI registry", "OPENENV_TEST_REGISTRY(_USER, _PASSWORD) are not set; `bash scripts/registry` prints them"
        )
    return Registry(host, user, password)


test_registry.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def engine2() -> Any:
    """A `docker.DockerClient` for the second, private engine (scripts/docker-engine2)."""
    import docker

    host = os.environ.get("OPENENV_TEST_DOCKER2_HOST")
    if not host:
        require_system(
            "second Docker engine", "OPENENV_TEST_DOCKER2_HOST is not set; `bash scripts/docker-engine2` starts it"
        )
    client = docker.DockerClient(base_url=host, timeout=120)
    try:
        client.ping()
    except Exception as exc:  # DockerException, requests' errors: it does not answer
        require_system("second Docker engine", f"{host} does not answer ({exc}); run `bash scripts/docker-engine2`")
    return client


def manifest_digest(
    registry: Registry, repository: str, reference: str, *, auth: bool = True
) -> tuple[int, str | None]:
    """(status, Docker-Content-Digest) of the registry's own answer to HEAD /v2/<repository>/manifests/<reference>."""
    reply = httpx.head(
        f"http://{registry.host}/v2/{repository}/manifests/{reference}",
        headers={"Accept": _ACCEPT},
        auth=(registry.user, registry.password) if auth else None,
        timeout=10,
    )
    return reply.status_code, reply.headers.get("Docker-Content-Digest")


@contextmanager
def private_registry(folder: Path) -> Iterator[tuple[str, Any, Any]]:
    """(host, start, stop): a registry of the caller's own at `folder` on a free port, not started yet.
    `start()` runs scripts/registry and returns its Registry; `stop()` stops it (also done at the end)."""
    port = free_port()
    env = {**os.environ, "OPENENV_REGISTRY_DIR": str(folder), "OPENENV_REGISTRY_PORT": str(port)}

    def start() -> Registry:
        out = subprocess.run(
            ["bash", "scripts/registry"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        values = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
        return Registry(
            values["OPENENV_TEST_REGISTRY"],
            values["OPENENV_TEST_REGISTRY_USER"],
            values["OPENENV_TEST_REGISTRY_PASSWORD"],
        )

    def stop() -> None:
        subprocess.run(["bash", "scripts/registry", "stop"], cwd=ROOT, env=env, check=True, timeout=60)

    try:
        yield f"127.0.0.1:{port}", start, stop
    finally:
        stop()
