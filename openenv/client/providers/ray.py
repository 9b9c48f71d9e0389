"""`RayProvider`: env servers as Ray actors, spread over a cluster's nodes.

    async with EnvPool.ray("envs/echo_env", size=4, address="auto") as pool:
        engine = RolloutEngine(pool, policy)           # records say which node served them
        batch = await engine.run(256)

Each replica is one actor (`num_cpus` of a node, scheduled with Ray's SPREAD strategy unless
`ray_options` says otherwise). The actor runs the env folder's server as a process on its node,
the way `ProcessProvider` does, or, given an `image`, a container on its node's Docker engine; it
publishes `http://<node address>:<port>`. The server process gets SIGKILL from the kernel when
its actor's process dies (Linux parent-death signal), so a dead actor or a lost node closes its
sessions at once: their clients raise `EnvDisconnectedError`. A pool made by `EnvPool.ray`
health-checks the actors (`check`), aborts the sessions of a dead one, and starts a replacement
(`replace`; see openenv.client._pool_watch). Actors belong to the driver:
Ray removes them when it exits, and `close()` stops them first. Needs the `ray` extra.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from openenv.client.providers.base import Provider
from openenv.errors import ConfigurationError, ProviderStartError, ProviderUnavailableError

if TYPE_CHECKING:
    from openenv.client.providers.container import ContainerProvider

__all__ = ["RayProvider", "ray_module"]

log = logging.getLogger("openenv.providers")

_PR_SET_PDEATHSIG = 1
_LOG_BYTES = 1 << 20  # the end of a server's output that `logs` reads


def ray_module() -> Any:
    """The `ray` package, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ProviderUnavailableError("RayProvider needs Ray: pip install 'openenv-hub[ray]'") from None
    return ray


def _die_with_parent() -> None:
    """In the child, before exec: its own process group, and SIGKILL when the parent goes."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _ServerActor:
    """Runs inside a Ray actor: one env server (process or container) on the actor's node."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None
        self.docker: ContainerProvider | None = None
        self.log_fd: int | None = None

    def start(self) -> dict[str, str]:
        """Start the server; returns its URL and the node's id and address (before it is healthy)."""
        import ray

        ctx = ray.get_runtime_context()
        host = ray.util.get_node_ip_address()
        if self.spec.get("image"):
            from openenv.client.providers.container import ContainerProvider

            self.docker = ContainerProvider(
                self.spec["image"],
                port=self.spec["port"],
                env=self.spec["env"],
                host=host,
                labels={"org.openenv.ray-node": ctx.get_node_id()},
            )
            url = self.docker.start()
        else:
            url = self._start_process(host)
        return {"url": url, "node": ctx.get_node_id(), "host": host}

    def _start_process(self, host: str) -> str:
        from openenv.client.providers.process import ProcessProvider, free_port

        # Only its venv and command line are used: the actor starts and owns the process.
        provider = ProcessProvider(self.spec["env_dir"], venv=self.spec["venv"], app=self.spec["app"], host=host)
        python = provider.interpreter()
        port = free_port(host)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.spec["env"]}
        # The output goes to a file already unlinked: it is gone once the server and the actor are,
        # however they end. O_APPEND keeps the server's writes at the end while `logs` preads.
        fd, path = tempfile.mkstemp(prefix="openenv-ray-", suffix=".log")
        os.close(fd)
        self.log_fd = os.open(path, os.O_RDWR | os.O_APPEND)
        os.unlink(path)
        started = threading.Event()
        failure: list[BaseException] = []

        def keeper() -> None:
            # The parent-death signal fires when the thread that forked exits: this thread lives as
            # long as the server does, and dies only with the actor's process.
            try:
                self.proc = subprocess.Popen(
                    provider.command(python, port),
                    cwd=provider.folder.path,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=self.log_fd,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,
                )
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                started.set()
            self.proc.wait()

        threading.Thread(target=keeper, name="openenv-server-keeper", daemon=True).start()
        started.wait()
        if failure:
            raise failure[0]
        return f"http://{host}:{port}"

    def poll(self) -> str | None:
        """None while the server runs; otherwise why it is gone."""
        if self.docker is not None:
            return self.docker.exit_reason()
        if self.proc is None:
            return "not started"
        code = self.proc.poll()
        return None if code is None else f"the server process exited with code {code}"

    def logs(self, tail: int = 200) -> str:
        if self.docker is not None:
            return str(self.docker.logs(tail))
        if self.log_fd is None:
            return ""
        size = os.fstat(self.log_fd).st_size
        start = max(0, size - _LOG_BYTES)
        text = os.pread(self.log_fd, size - start, start).decode(errors="replace")
        return "\n".join(text.splitlines()[-tail:])

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.docker is not None:
            self.docker.stop()
            return
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def _refuses(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=1.0):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # unreachable or slow is not proof: the actor is asked


@dataclass
class _Replica:
    actor: Any
    url: str
    node: str
    dead: str | None = None


class RayProvider(Provider):
    """Run `replicas` env servers as Ray actors spread over the cluster's nodes.

    Args:
        env_dir: an env folder, run as a process in each actor (its node must have the folder).
        image: or an image, run as a container on each actor's node (needs Docker there).
        replicas: how many servers (one actor each).
        address: the Ray cluster to join when this process has not joined one ("auto": the local
            cluster `ray start` made; None: Ray's default, which starts one here if none runs).
        num_cpus: CPUs each actor reserves on its node (its server's share).
        venv: for `env_dir`: True: the env's own cached venv; False: the actor's interpreter.
        app: the ASGI app's import string (default: the manifest's).
        port: for `image`: the port the server listens on in the container.
        env: environment variables for every server.
        ray_options: more `ActorClass.options(...)` (resources, scheduling_strategy, runtime_env...).
        **kwargs: `Provider` options (startup_timeout_s, stop_timeout_s, labels, name).
    """

    kind = "ray"

    def __init__(
        self,
        env_dir: str | Path | None = None,
        *,
        image: str | None = None,
        replicas: int = 1,
        address: str | None = None,
        num_cpus: float = 1.0,
        venv: bool = False,
        app: str | None = None,
        port: int = 8000,
        env: dict[str, str] | None = None,
        ray_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if (env_dir is None) == (image is None):
            raise ConfigurationError(
                "RayProvider runs an env folder or an image: pass env_dir=... or image=..., not both"
            )
        if replicas < 1:
            raise ConfigurationError("replicas must be >= 1")
        if num_cpus < 0:
            raise ConfigurationError("num_cpus must be >= 0")
        name = Path(env_dir).name if env_dir is not None else str(image).rsplit("/", 1)[-1].split(":")[0]
        super().__init__(**{"name": name, **kwargs})
        self.spec: dict[str, Any] = {
            "env_dir": str(Path(env_dir).resolve()) if env_dir is not None else None,
            "image": image,
            "venv": venv,
            "app": app,
            "port": port,
            "env": dict(env or {}),
        }
        self.replicas_wanted = replicas
        self.address = address
        self.num_cpus = num_cpus
        self.ray_options = dict(ray_options or {})
        self.replicas: list[_Replica] = []
        self._lock = threading.Lock()

    # -- Ray ------------------------------------------------------------------------------------------

    def _ray(self) -> Any:
        ray = ray_module()
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        return ray

    def _new_actor(self) -> tuple[Any, Any]:
        ray = self._ray()
        options = {
            "num_cpus": self.num_cpus,
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
            "max_concurrency": 4,
            **self.ray_options,
        }
        actor = ray.remote(_ServerActor).options(**options).remote(self.spec)
        return actor, actor.start.remote()

    def _start_replicas(self, count: int) -> list[_Replica]:
        ray = self._ray()
        started = [self._new_actor() for _ in range(count)]
        out: list[_Replica] = []
        try:
            infos = ray.get([ref for _, ref in started], timeout=self.startup_timeout_s)
        except Exception as exc:
            for actor, _ in started:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
            raise ProviderStartError(f"Ray could not start {self.name}'s server actors: {exc}") from None
        for (actor, _), info in zip(started, infos, strict=True):
            out.append(_Replica(actor, info["url"], info["node"]))
        return out

    # -- Provider -------------------------------------------------------------------------------------

    def _launch(self) -> list[str]:
        replicas = self._start_replicas(self.replicas_wanted)
        with self._lock:
            self.replicas = replicas
        return [r.url for r in replicas]

    def _terminate(self) -> None:
        with self._lock:
            replicas, self.replicas = self.replicas, []
        if not replicas:
            return
        ray = ray_module()
        if not ray.is_initialized():
            return  # the driver left the cluster: Ray removed its actors, their servers died with them
        refs = [r.actor.stop.remote(self.stop_timeout_s) for r in replicas if r.dead is None]
        with contextlib.suppress(Exception):
            ray.wait(refs, num_returns=len(refs), timeout=self.stop_timeout_s + 5)
        for r in replicas:
            with contextlib.suppress(Exception):
                ray.kill(r.actor)

    def exit_reason(self) -> str | None:
        with self._lock:
            replicas = list(self.replicas)
        if not self._launched:
            return "not started"
        dead = self.check(replicas, probe=False)  # still starting servers refuse connections
        return dead[0].dead if dead else None

    def check(
        self, replicas: list[_Replica] | None = None, timeout_s: float = 5.0, probe: bool = True
    ) -> list[_Replica]:
        """Ask every actor whether it and its server live; returns (and marks) the dead ones.

        With `probe`, a server that refuses TCP connections counts as dead without asking its actor.
        """
        ray = ray_module()
        with self._lock:
            targets = [r for r in (replicas if replicas is not None else self.replicas) if r.dead is None]
        refs = [r.actor.poll.remote() for r in targets]
        deadline = time.monotonic() + timeout_s
        dead = []
        for replica, ref in zip(targets, refs, strict=True):
            timeout_s = max(0.1, deadline - time.monotonic())  # one deadline for all: lost nodes hold many actors
            try:
                # A lost node's actors are declared dead only after Ray's own health checks time
                # out; a server that refuses connections is known gone at once.
                reason = (
                    "its server refuses connections"
                    if probe and _refuses(replica.url)
                    else ray.get(ref, timeout=timeout_s)
                )
            except ray.exceptions.GetTimeoutError:
                reason = f"its actor did not answer a health check within {timeout_s:g}s"
            except ray.exceptions.RayError as exc:
                reason = f"its actor died ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
            if reason is not None:
                replica.dead = reason
                dead.append(replica)
        return dead

    def replace(self, replica: _Replica) -> _Replica:
        """Remove a dead replica and start another (on whichever node SPREAD picks); returns it."""
        ray = ray_module()
        with contextlib.suppress(Exception):
            ray.kill(replica.actor)
        new = self._start_replicas(1)[0]
        with self._lock:
            if not self._launched:
                ray.kill(new.actor)
                raise ProviderStartError(f"{self.name} was stopped while a replica was being replaced")
            self.replicas = [r for r in self.replicas if r is not replica] + [new]
            self.base_urls = [r.url for r in self.replicas]
        return new

    def node_of(self, url: str) -> str | None:
        """The id of the Ray node that serves `url` (None when it is not one of this provider's)."""
        with self._lock:
            return next((r.node for r in self.replicas if r.url == url), None)

    def logs(self, tail: int = 200) -> str:
        ray = ray_module()
        with self._lock:
            replicas = [r for r in self.replicas if r.dead is None]
        parts = []
        for r in replicas:
            try:
                parts.append(f"--- {r.url} (node {r.node[:12]}) ---\n{ray.get(r.actor.logs.remote(tail), timeout=10)}")
            except Exception as exc:
                parts.append(f"--- {r.url}: logs unavailable ({exc}) ---")
        return "\n".join(parts)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            nodes = {r.url: r.node for r in self.replicas}
        return {**super().describe(), "env_dir": self.spec["env_dir"], "image": self.spec["image"], "nodes": nodes}
