"""The container engine: one port that every part of the SDK and the Hub reaches containers through.

    from openenv.engines import engine
    eng = engine()                  # OPENENV_CONTAINER_ENGINE: "docker" (default) or "podman"
    client = eng.client()           # the engine's shared client (docker SDK API, pinged once)
    eng.epoch(client)               # changes when the engine restarts (None: cannot tell)
    eng.ensure_isolated_network(client, "openenv-hub-smoke", "oe-hub-smoke0", labels)

Both engines speak the Docker Engine API (Podman through `podman system service`), so a client is
a `docker.DockerClient` and containers, images, pushes, pulls, logs, stats and label queries are
the same calls on either. What differs between engines lives here, behind `ContainerEngine`: where
the engine listens, how to tell that it restarted, how builds run (Docker: BuildKit through its CLI;
Podman: buildah behind the API, which reads BuildKit's syntax itself), how a network with no route
out is made and which host interface its traffic comes from (for the Hub's firewall rules).

Where the engine runs is the port's to say too. `local` is true only for an engine reached through a
unix socket: its containers' processes, cgroups, network namespaces and bridges are then this
machine's, and the Hub may read them (`openenv.engines.host`), set its build limits and firewall
rules. An engine reached over `tcp://` or `ssh://` counts as another machine's, even at 127.0.0.1:
nothing of this machine's kernel is taken as evidence about it, its published ports are reached at
its own address (`address`), builds go to it through its CLI with its host (`cli_env`), and
`unenforced` names what the Hub cannot guarantee there.

Adding an engine that speaks the Docker API is one module with a `ContainerEngine` subclass and
one line in `ENGINES`; `OPENENV_CONTAINER_ENGINE` then selects it.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar
from urllib.parse import urlsplit

from openenv.engines import _settings
from openenv.errors import ProviderUnavailableError

__all__ = ["ENGINES", "ContainerEngine", "DockerEngine", "PodmanEngine", "engine", "engine_of"]

# Pools start dozens of containers at once, each from its own worker thread: the SDK's default
# of 10 pooled connections would make most of them wait (and warn) for a free one.
_POOL_SIZE = 128


class ContainerEngine:
    """An engine reached over the Docker Engine API.

    Attributes:
        kind: the name `OPENENV_CONTAINER_ENGINE` selects it by.
        buildkit: whether images are built with BuildKit's CLI (else through the API).
        host: where the engine listens (None: the SDK's default, DOCKER_HOST or the local socket).
    """

    kind: ClassVar[str] = ""
    buildkit: ClassVar[bool] = False
    #: the network containers and builds' RUN steps join when none is named
    default_network: ClassVar[str] = "bridge"
    #: whether an isolated network needs the Hub's firewall to have no route out (its own set-up
    #: only keeps containers apart): the Hub then drops all new connections from its interface.
    isolation_needs_firewall: ClassVar[bool] = False
    start_hint: ClassVar[str] = ""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or self.default_host()
        self._lock = threading.Lock()
        self._client: Any = None

    @classmethod
    def default_host(cls) -> str | None:
        """Where the engine listens when no host is given (read from its setting at each call)."""
        return _settings.docker_host()

    # -- clients ---------------------------------------------------------------------------------
    def new_client(self, timeout: float | None = None, *, ping: bool = True) -> Any:
        """A client of its own (its own connection pool and timeout), pinged unless `ping=False`.

        Raises:
            ProviderUnavailableError: the docker SDK is missing, or the engine does not answer.
        """
        try:
            import docker
        except ImportError as exc:
            raise ProviderUnavailableError(
                "running containers needs the docker SDK: pip install 'openenv-hub[docker]'"
            ) from exc
        options: dict[str, Any] = {"max_pool_size": _POOL_SIZE}
        if timeout is not None:
            options["timeout"] = int(max(1, timeout))
        try:
            if self.host and self.host != _settings.docker_host():
                client = docker.DockerClient(base_url=self.host, **options)
            else:  # DOCKER_HOST's engine: from_env also reads its TLS settings (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH)
                client = docker.from_env(**options)
            if ping:
                client.ping()
        except Exception as exc:  # DockerException, requests' errors: all mean "no engine here"
            raise ProviderUnavailableError(f"no {self.label} reachable ({exc}); {self.start_hint}") from exc
        return client

    def client(self) -> Any:
        """The process's shared client of this engine, made and pinged on first use.

        Raises:
            ProviderUnavailableError: the docker SDK is missing, or the engine does not answer.
        """
        with self._lock:
            if self._client is None:
                self._client = self.new_client()
            return self._client

    @property
    def label(self) -> str:
        return f"{self.kind.capitalize()} engine"

    # -- where it runs ---------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """One name per engine (kind and host), for what is kept per engine."""
        return f"{self.kind}@{self.host or 'default'}"

    @property
    def local(self) -> bool:
        """Whether the engine runs on this machine: reached through a unix socket (the default).
        Over tcp:// or ssh:// it counts as another machine's, even at 127.0.0.1."""
        return _is_local(self.host)

    @property
    def address(self) -> str:
        """Where its containers' published ports are published and reached from here: 127.0.0.1 for
        a local engine, the engine's own host otherwise."""
        return _address(self.host)

    def where(self) -> str:
        """The engine and where it listens, for messages."""
        return f"{self.label} at {self.host}" if self.host else self.label

    def cli_env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` (a process environment) as the engine's own CLI needs it to reach this engine."""
        return {**base, "DOCKER_HOST": self.host} if self.host else base

    def check_isolation(self) -> None:
        """Whether an isolated network (`ensure_isolated_network`) can reach nothing on this engine.

        Raises:
            ProviderUnavailableError: the engine runs elsewhere and its isolated network needs the
                firewall of its own host to have no route out (Podman), which cannot be set from here.
        """
        if not self.local and self.isolation_needs_firewall:
            raise ProviderUnavailableError(
                f"the {self.where()} runs on another machine, and its isolated network keeps containers from the "
                "internet only with firewall rules on the engine's own host, which cannot be set from here: run a "
                "Hub worker on that host, or use a Docker engine"
            )

    def unenforced(self) -> list[str]:
        """What the Hub cannot guarantee for containers and builds on this engine, one line each
        (none for a local engine); smoke logs carry them and docs/security.md explains them."""
        if self.local:
            return []
        where = f"the {self.where()} runs on another machine"
        return [
            f"{where}: the Hub's firewall rules (no new connections from its containers to that host's own "
            "services) are not set there; its isolated network only has no route out",
            f"{where}: builds run without the Hub's memory and process caps (they are set on this machine's cgroups)",
            f"{where}: the container's processes, cgroup, files and network namespace cannot be seen from here, so "
            "the runtime, containment, bounds, oracle and network checks skip",
        ]

    # -- what differs ----------------------------------------------------------------------------
    def epoch(self, client: Any) -> str | None:
        """A value that changes whenever the engine restarts (None: this engine cannot tell)."""
        return None

    def default_bridge(self, client: Any) -> str | None:
        """The host interface of the engine's default network (where builds' RUN steps run), or None."""
        return None

    def ensure_isolated_network(self, client: Any, name: str, bridge: str, labels: dict[str, str]) -> str:
        """Create (when missing) a network for containers that must reach nothing (no route out,
        not each other; with `isolation_needs_firewall`, the route out is closed by the Hub's
        firewall) while ports published on the host still reach them; returns the host interface
        its traffic comes from."""
        raise NotImplementedError

    def container_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Host-config options (`docker.APIClient.create_host_config` keywords) as this engine needs them."""
        return options

    def runtime_options(self, api: Any, runtime: str) -> dict[str, Any]:
        """Host-config options that run a container under OCI runtime `runtime` (runc, runsc).

        Raises:
            ProviderUnavailableError: this engine cannot run containers under it (says how to set it up).
        """
        from openenv.engines.runtimes import require_runtime

        require_runtime(api, runtime)
        return {"runtime": runtime}


class DockerEngine(ContainerEngine):
    """Docker (dockerd): BuildKit builds through the docker CLI; DOCKER_HOST or the local socket."""

    kind = "docker"
    buildkit = True
    start_hint = "start Docker (bash scripts/docker-engine), or set DOCKER_HOST"

    def epoch(self, client: Any) -> str | None:
        # dockerd makes its default `bridge` network anew at every start.
        try:
            return str(client.networks.get("bridge").attrs.get("Created") or "") or None
        except Exception:  # no such network (bridge disabled), or no engine: cannot tell
            return None

    def default_bridge(self, client: Any) -> str | None:
        options = client.networks.get("bridge").attrs.get("Options") or {}
        return str(options.get("com.docker.network.bridge.name", "docker0"))

    def ensure_isolated_network(self, client: Any, name: str, bridge: str, labels: dict[str, str]) -> str:
        if not any(n.name == name for n in client.networks.list(names=[name])):
            client.networks.create(
                name,
                driver="bridge",
                options={
                    "com.docker.network.bridge.enable_ip_masquerade": "false",  # no route out
                    "com.docker.network.bridge.enable_icc": "false",  # containers cannot talk to each other
                    "com.docker.network.bridge.name": bridge,
                },
                labels=labels,
            )
        return bridge


class PodmanEngine(ContainerEngine):
    """Podman through its API service (`podman system service`, CONTAINER_HOST): builds run in
    buildah behind the API; there is no daemon whose restart would stop containers, so `epoch` is
    None and only its answering counts."""

    kind = "podman"
    buildkit = False
    default_network = "podman"
    isolation_needs_firewall = True
    start_hint = "start Podman's API service (bash scripts/podman-engine), or set CONTAINER_HOST"

    @classmethod
    def default_host(cls) -> str | None:
        return _settings.podman_host()

    def container_options(self, options: dict[str, Any]) -> dict[str, Any]:
        # Given any ulimit, Podman 4.3 also sets RLIMIT_NPROC, to more than the caller's hard limit
        # here, and runc refuses to start the container ("error setting rlimit type 6"): name one.
        ulimits = list(options.get("ulimits") or [])
        if ulimits and not any(_ulimit_name(u) == "nproc" for u in ulimits):
            import resource

            from docker.types import Ulimit

            hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
            cap = _NPROC if hard == resource.RLIM_INFINITY else min(hard, _NPROC)
            options = {**options, "ulimits": [*ulimits, Ulimit(name="nproc", soft=cap, hard=cap)]}
        return options

    def runtime_options(self, api: Any, runtime: str) -> dict[str, Any]:
        # Podman 4.3's Docker-compatible API ignores a container's runtime (checked: asked for runsc,
        # the container ran under runc), so the runtime is the service's default, set in its
        # containers.conf; a container that asks for another one is refused rather than run unconfined.
        default = str(api.info().get("DefaultRuntime") or "")
        if runtime != default:
            raise ProviderUnavailableError(
                f"Podman's API service runs every container under its default runtime ({default or 'unknown'}) and "
                f"cannot pick {runtime!r} for one; start a service whose containers.conf names it "
                f"(OPENENV_PODMAN_RUNTIME={runtime} bash scripts/podman-engine)"
            )
        return {}

    def _libpod(self, client: Any, path: str) -> Any:
        reply = client.api.get(f"{client.api.base_url}/v4.0.0/libpod{path}", timeout=30)
        reply.raise_for_status()
        return reply.json()

    def _interface(self, client: Any, network: str) -> str | None:
        return self._libpod(client, f"/networks/{network}/json").get("network_interface") or None

    def default_bridge(self, client: Any) -> str | None:
        return self._interface(client, "podman")

    def ensure_isolated_network(self, client: Any, name: str, bridge: str, labels: dict[str, str]) -> str:
        # Podman 4.3 masquerades every bridge network it makes, and the ports of an `internal` one
        # (no gateway) cannot be reached from the host (tried: the published port answered 403
        # from elsewhere). So the network is a plain bridge whose containers are kept apart
        # (`enable_icc` false becomes CNI's `isolate`), and the Hub's firewall drops every new
        # connection from its interface (`isolation_needs_firewall`). Its own interface name, so
        # that Docker's smoke bridge on the same host is never touched.
        interface = bridge.replace("oe-hub-", "oe-pod-", 1)[:15]
        if not any(n.name == name for n in client.networks.list(names=[name])):
            client.networks.create(
                name,
                driver="bridge",
                options={"com.docker.network.bridge.name": interface, "com.docker.network.bridge.enable_icc": "false"},
                labels=labels,
            )
        return self._interface(client, name) or interface


_NPROC = 4096  # RLIMIT_NPROC Podman containers get when they name other ulimits (per uid on the host)


def _ulimit_name(ulimit: Any) -> str:
    return str(ulimit.get("Name") if isinstance(ulimit, dict) else getattr(ulimit, "name", ""))


ENGINES: dict[str, type[ContainerEngine]] = {"docker": DockerEngine, "podman": PodmanEngine}
_made: dict[tuple[str, str | None], ContainerEngine] = {}
_made_lock = threading.Lock()


def _is_local(host: str | None) -> bool:
    return host is None or host.startswith("unix://") or host.startswith("/")


def _address(host: str | None) -> str:
    if _is_local(host):
        return "127.0.0.1"
    return urlsplit(str(host)).hostname or "127.0.0.1"


def engine_of(client: Any) -> ContainerEngine:
    """The engine a docker SDK `client` talks to: the one whose shared client it is, else the
    engine of the configured kind at the client's address (a unix socket, or tcp://HOST:PORT)."""
    with _made_lock:
        for made in _made.values():
            if made._client is client:
                return made
    api = getattr(client, "api", client)
    base = str(getattr(api, "base_url", "") or "")
    if base.startswith(("http://", "https://")):
        return engine(host="tcp://" + base.split("://", 1)[1])
    socket = getattr(getattr(api, "_custom_adapter", None), "socket_path", None)
    if base.startswith("http+docker://ssh"):
        return engine(host="ssh://" + str(getattr(getattr(api, "_custom_adapter", None), "ssh_host", "") or "remote"))
    return engine(host=f"unix://{socket}" if socket else None)


def engine(kind: str | None = None, host: str | None = None) -> ContainerEngine:
    """The engine `kind` (default OPENENV_CONTAINER_ENGINE) at `host` (default its own setting, read
    now), one object per process for each kind and host, so its shared client is shared.

    Raises:
        ProviderUnavailableError: no engine of that name is known.
    """
    kind = (kind or _settings.engine_kind()).lower()
    if kind not in ENGINES:
        raise ProviderUnavailableError(
            f"OPENENV_CONTAINER_ENGINE={kind!r} names no engine this openenv knows: use one of {', '.join(ENGINES)}"
        )
    cls = ENGINES[kind]
    key = (kind, host or cls.default_host())
    with _made_lock:
        if key not in _made:
            _made[key] = cls(key[1])
        return _made[key]
