"""`SwarmProvider`: N replicas of an env image as one Docker Swarm service.

    async with SwarmProvider("echo-env:latest", replicas=4) as p:
        p.base_urls          # one URL per replica; EnvPool hands sessions out across them

Each replica publishes its port in swarm's "host" mode on a port the engine picks, so every
replica has its own URL and a WebSocket session stays on one replica. (Swarm cannot publish a
service port on one interface only: the port is open on all of the node's interfaces. Clients
here still connect through 127.0.0.1; on a multi-node swarm the URL uses the task's node
address.) Tasks are not restarted when they exit: a restarted replica would get a new port that
clients do not know, so a crash is reported instead (`exit_reason`).

The engine must be a swarm manager: `docker swarm init` (or `ensure_swarm()`, which the tests use
to make a single-node swarm on 127.0.0.1).
"""

from __future__ import annotations

import time
from typing import Any

from openenv.client.providers import lifecycle
from openenv.client.providers._docker import docker_client, docker_errors
from openenv.client.providers.base import Provider
from openenv.client.providers.container import container_name
from openenv.errors import ConfigurationError, ProviderStartError, ProviderUnavailableError

__all__ = ["SwarmProvider", "ensure_swarm", "leave_swarm", "swarm_active"]

_FAILED = {"failed", "rejected", "shutdown", "complete", "orphaned", "remove"}


def swarm_active(client: Any = None) -> bool:
    """Whether the engine is a manager of an active swarm."""
    info = (client or docker_client()).api.info().get("Swarm") or {}
    return info.get("LocalNodeState") == "active" and bool(info.get("ControlAvailable"))


def ensure_swarm(client: Any = None, advertise_addr: str = "127.0.0.1") -> bool:
    """Make the engine a single-node swarm manager unless it is one; returns True if it did.

    Plain `docker run` keeps working on a swarm node; `leave_swarm()` undoes this.
    """
    client = client or docker_client()
    if swarm_active(client):
        return False
    client.api.init_swarm(advertise_addr=advertise_addr, listen_addr=f"{advertise_addr}:2377", force_new_cluster=False)
    return True


def leave_swarm(client: Any = None) -> None:
    """Leave the swarm (force: this node is its only manager). Services still running are removed."""
    (client or docker_client()).api.leave_swarm(force=True)


class SwarmProvider(Provider):
    """Run an env image as a replicated Docker Swarm service.

    Args:
        image: the image reference (present on the nodes or pullable by them).
        replicas: how many replicas (each its own env server and URL).
        port: the port the server listens on inside the container.
        env: environment variables for every replica.
        advertise_host: the address of this node's published ports (loopback by default).
        docker_client: a `docker.DockerClient` (default: from DOCKER_HOST / the local socket).
        **kwargs: `Provider` options (startup_timeout_s, stop_timeout_s, labels, name).
    """

    kind = "service"

    def __init__(
        self,
        image: str,
        *,
        replicas: int = 1,
        port: int = 8000,
        env: dict[str, str] | None = None,
        advertise_host: str = "127.0.0.1",
        docker_client: Any = None,
        **kwargs: Any,
    ) -> None:
        if replicas < 1:
            raise ConfigurationError("replicas must be >= 1")
        super().__init__(**{"name": container_name(image), **kwargs})
        self.image = image
        self.replicas = replicas
        self.port = port
        self.env = dict(env or {})
        self.advertise_host = advertise_host
        self._client = docker_client
        self.service_id: str | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    def service_spec(self) -> dict[str, Any]:
        """The keyword arguments of `APIClient.create_service` for this provider."""
        from docker.types import ContainerSpec, EndpointSpec, Healthcheck, RestartPolicy, ServiceMode, TaskTemplate

        labels = lifecycle.owner_labels(self.image, self.labels)
        spec = ContainerSpec(
            self.image,
            env=[f"{k}={v}" for k, v in self.env.items()],
            labels=labels,
            stop_grace_period=int(self.stop_timeout_s * 1e9),
            # Swarm holds a task in "starting" (and its port unpublished) until the image's own
            # HEALTHCHECK first passes, typically 10 s later; this provider polls /health itself.
            healthcheck=Healthcheck(test=["NONE"]),
        )
        endpoint = EndpointSpec()
        endpoint["Ports"] = [{"Protocol": "tcp", "TargetPort": self.port, "PublishMode": "host"}]
        return {
            "task_template": TaskTemplate(spec, restart_policy=RestartPolicy(condition="none")),
            "name": self.name,
            "labels": labels,
            "mode": ServiceMode("replicated", replicas=self.replicas),
            "endpoint_spec": endpoint,
        }

    def _launch(self) -> list[str]:
        api = self.client.api
        if not swarm_active(self.client):
            raise ProviderUnavailableError(
                "the Docker engine is not a swarm manager; run `docker swarm init` (single node: "
                "`docker swarm init --advertise-addr 127.0.0.1`) or use ContainerProvider"
            )
        try:
            self.service_id = api.create_service(**self.service_spec())["ID"]
        except docker_errors().APIError as exc:
            raise ProviderStartError(
                f"the swarm could not create service {self.name}: {exc.explanation or exc}"
            ) from None
        return self._wait_for_tasks(api)

    def _wait_for_tasks(self, api: Any) -> list[str]:
        """Wait until every replica's task runs with a published port; returns their URLs."""
        local_node = (api.info().get("Swarm") or {}).get("NodeID")
        deadline = time.monotonic() + self.startup_timeout_s
        delay = 0.02
        while True:
            tasks = api.tasks(filters={"service": self.service_id, "desired-state": "running"})
            urls = []
            for task in tasks:
                status = task.get("Status") or {}
                if status.get("State") in _FAILED:
                    raise ProviderStartError(
                        f"replica {task.get('Slot')} of {self.name} {status.get('State')}: {status.get('Err') or status.get('Message')}"
                    )
                ports = ((status.get("PortStatus") or {}).get("Ports")) or []
                if status.get("State") == "running" and ports:
                    urls.append(
                        f"http://{self._node_host(api, task.get('NodeID'), local_node)}:{ports[0]['PublishedPort']}"
                    )
            if len(urls) >= self.replicas:
                return sorted(urls)
            if time.monotonic() > deadline:
                states = sorted((t.get("Status") or {}).get("State", "?") for t in tasks)
                raise ProviderStartError(
                    f"{self.name}: replicas not running within {self.startup_timeout_s:g}s (task states: {states})"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _node_host(self, api: Any, node_id: str | None, local_node: str | None) -> str:
        if node_id is None or node_id == local_node:
            return self.advertise_host
        return str((api.inspect_node(node_id).get("Status") or {}).get("Addr") or self.advertise_host)

    def _terminate(self) -> None:
        sid, self.service_id = self.service_id, None
        if sid is None:
            return
        api = self.client.api
        try:
            api.remove_service(sid)
        except docker_errors().NotFound:
            return
        # Removing a service only schedules its tasks' shutdown; wait for the containers to go, so
        # "stopped" means stopped (and nothing is left running for a check to find).
        deadline = time.monotonic() + self.stop_timeout_s + 15
        selector = {"label": f"com.docker.swarm.service.id={sid}"}
        while api.containers(all=True, filters=selector) and time.monotonic() < deadline:
            time.sleep(0.05)

    def exit_reason(self) -> str | None:
        if self.service_id is None:
            return "not started"
        try:
            tasks = self.client.api.tasks(filters={"service": self.service_id})
        except docker_errors().NotFound:
            return f"service {self.name} was removed"
        if not tasks:
            return None
        for task in tasks:
            status = task.get("Status") or {}
            if task.get("DesiredState") == "running" and status.get("State") in _FAILED:
                return f"replica {task.get('Slot')} of {self.name} is {status.get('State')}: {status.get('Err') or status.get('Message')}"
            if task.get("DesiredState") == "shutdown" and status.get("State") in ("failed", "complete"):
                return f"replica {task.get('Slot')} of {self.name} exited: {status.get('Err') or status.get('Message')}"
        return None

    def logs(self, tail: int = 200) -> str:
        if self.service_id is None:
            return ""
        try:
            chunks = self.client.api.service_logs(self.service_id, stdout=True, stderr=True, tail=tail)
            return b"".join(chunks).decode(errors="replace")
        except docker_errors().APIError as exc:
            return f"(service logs unavailable: {exc})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "image": self.image, "service": self.service_id, "replicas": self.replicas}
