"""How the Hub confines code it did not write: smoke-test containers and image builds.

Smoke-test containers run as an unprivileged user (uid 1000, as a Hugging Face Space runs), with
no capabilities, no new privileges, a read-only root with a small tmpfs at /tmp (a fallback
without the read-only root is tried once, for envs that write their own folder), memory / CPU / process / file-size limits, and on a network of their own from which
nothing can be reached — no NAT to the outside world, no traffic between containers, and no new
connections to the host — while the Hub still reaches the server through its port published on
127.0.0.1. Builds get a time limit, memory and process limits, an image size cap enforced while
they run, and no network unless the operator allows egress; with egress, RUN steps still cannot
open connections to the host's own services. Nothing of the service's
own environment (tokens, database URL, secrets) is passed to either.

Every container the Hub starts carries `HUB_LABEL` (which Hub: a digest of its database URL) besides
the client's owner label (host, pid and start time of the process that started it); `reap_leftovers`
removes the Hub's containers whose owner died (a worker killed mid-smoke, a Hub killed outright).

Containers, networks and the default bridge are reached through the container-engine port,
`openenv.engines` (Docker or Podman, `OPENENV_CONTAINER_ENGINE`); the OCI runtime of untrusted
containers is `HubSettings.sandbox_runtime` (runc, or gVisor's runsc), checked on the host.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from hub_service.settings import HubSettings
from openenv.engines import ContainerEngine
from openenv.engines.runtimes import GVISOR

__all__ = [
    "BRIDGE_NAME",
    "HUB_LABEL",
    "SMOKE_ENV",
    "SMOKE_NETWORK",
    "SMOKE_USER",
    "RuntimeUnverified",
    "block_host_from_default_bridge",
    "build_limits",
    "build_options",
    "confined_provider",
    "ensure_smoke_network",
    "grant",
    "hub_instance",
    "reap_leftovers",
    "smoke_process_cap",
    "smoke_run_options",
    "verify_runtime",
]

log = logging.getLogger("hub_service.sandbox")

SMOKE_NETWORK = "openenv-hub-smoke"
SMOKE_USER = "1000:1000"  # the uid a Hugging Face Space runs as
SMOKE_ENV = {"HOME": "/tmp"}  # a writable home for libraries that cache under ~
BRIDGE_NAME = "oe-hub-smoke0"
HUB_LABEL = "org.openenv.hub.instance"
_lock = threading.Lock()
_ready: dict[str, str] = {}  # "<engine>:<network>" -> the host interface of a network made or found
_default_bridge: dict[str, str] = {}  # the engine's default bridge, looked up once per engine


def ensure_smoke_network(
    client: Any, name: str = SMOKE_NETWORK, bridge: str = BRIDGE_NAME, *, on: ContainerEngine | None = None
) -> str:
    """Create (once per engine) the isolated network smoke containers join
    (`ContainerEngine.ensure_isolated_network`: no route out) on `client`'s engine (`on`, default
    the one `client` reaches), its host interface named `bridge`; returns its name.

    The Hub's firewall rules that keep the network's containers off the host go on this machine
    only: an engine elsewhere gets none (`ContainerEngine.unenforced` says so in the smoke log),
    and one whose isolated network needs them to have no route out at all is refused.

    Raises:
        ProviderUnavailableError: the engine runs elsewhere and its isolated network needs the
            Hub's firewall (Podman); the host's set-up, never the env's.
    """
    from openenv.engines import engine_of

    eng = on if on is not None else engine_of(client)
    eng.check_isolation()
    with _lock:
        key = f"{eng.key}:{bridge}:{name}"  # one bridge name per engine: a second engine has its own
        if key not in _ready:
            _ready[key] = eng.ensure_isolated_network(client, name, bridge, {"org.openenv.hub": "smoke-network"})
        bridge = _ready[key]
    # Asked every time (it remembers what it made): a Hub that stopped took its rules with it.
    if eng.local:
        _block_host_access(bridge, anywhere=eng.isolation_needs_firewall)
    return name


def _block_host_access(bridge: str, *, anywhere: bool = False) -> None:
    """Drop new connections from the bridge to the host itself (its services on 0.0.0.0), or with
    `anywhere` to any address (an engine whose isolated network still routes out), in the Hub's own
    firewall chain (hub_service/firewall.py), removed again when the Hub stops.

    Replies to the Hub's own connections into containers stay allowed (they are ESTABLISHED).
    Needs root and iptables; without them the log says so: Docker's network still has no route
    out, Podman's then does (rootless Podman: docs/deploy.md).
    """
    from hub_service.firewall import block_new_connections_from

    try:
        block_new_connections_from(bridge, anywhere=anywhere)
    except OSError as exc:  # the smoke network still has no route out; the operator hears why
        log.warning("could not keep containers on %s off the host's services: %s", bridge, exc)


_GVISOR_THREADS_PER_PROCESS = 32  # host threads of gVisor's sandbox per process inside (ptrace platform)
_GVISOR_MB_PER_PROCESS = 32  # memory gVisor holds per forked server process (measured: 15-30 MB)


def smoke_process_cap(settings: HubSettings, memory_mb: int | None = None) -> int:
    """How many processes a confined container may run. Under runc: `smoke_pids`. Under gVisor it
    is also bounded by the container's memory limit (`memory_mb`: what the env was granted; default
    `smoke_memory`): the sandbox keeps state of its own for each process (a forked Python server
    cost it 15-30 MB here, where runc shares the pages), so 256 forks of a server would meet a 1 GB
    limit and kill the container before the process cap stopped them."""
    if settings.sandbox_runtime != GVISOR:
        return settings.smoke_pids
    memory_mb = memory_mb if memory_mb is not None else _bytes(settings.smoke_memory) >> 20
    return max(8, min(settings.smoke_pids, memory_mb // _GVISOR_MB_PER_PROCESS))


def _process_limits(settings: HubSettings, memory_mb: int | None = None) -> dict[str, Any]:
    """The `ulimits` and `pids_limit` of a confined container whose memory limit is `memory_mb`."""
    from docker.types import Ulimit

    files = settings.smoke_file_size_mb << 20
    ulimits = [Ulimit(name="fsize", soft=files, hard=files), Ulimit(name="nofile", soft=4096, hard=4096)]
    if settings.sandbox_runtime != GVISOR:
        return {"ulimits": ulimits, "pids_limit": settings.smoke_pids}
    # Under gVisor the container's processes live inside its own kernel, which counts them against
    # RLIMIT_NPROC (per container, not per host uid as under runc); the host's pids limit then only
    # bounds gVisor's own threads, several per process the code starts.
    cap = smoke_process_cap(settings, memory_mb)
    return {
        "ulimits": [*ulimits, Ulimit(name="nproc", soft=cap, hard=cap)],
        "pids_limit": cap * _GVISOR_THREADS_PER_PROCESS,
    }


def smoke_run_options(settings: HubSettings, network: str | None, *, read_only: bool = True) -> dict[str, Any]:
    """Keyword arguments of the Docker host config for a smoke-test container."""
    options: dict[str, Any] = {
        "mem_limit": settings.smoke_memory,
        "memswap_limit": settings.smoke_memory,  # no swap beyond the memory limit
        "nano_cpus": int(settings.smoke_cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        **_process_limits(settings),
        "tmpfs": {"/tmp": f"rw,size={settings.smoke_tmpfs_mb}m,mode=1777"},
        "read_only": read_only,
    }
    if network:
        options["network_mode"] = network
    return options


class RuntimeUnverified(Exception):
    """A container meant for the Hub's sandbox runtime that the Hub cannot show runs under it: the
    host's set-up, never the env's doing. The message says what was seen and how to fix it."""


def verify_runtime(settings: HubSettings, provider: Any, log_line: Callable[[str], None]) -> None:
    """Check, on the engine's host, the runtime a started confined container really runs under, and
    say what was seen (`log_line`). Fails closed: a container meant for gVisor counts only when this
    host saw gVisor's own program as its first process (evidence the image cannot forge), so one
    the Hub cannot look at (an engine on another host, a Hub not running as root, another pid
    namespace) is stopped as surely as one seen on the host's kernel.

    Raises:
        RuntimeUnverified: the container was stopped; the message says why and what to do.
    """
    from openenv.engines import engine

    observed = provider.observed_runtime()
    log_line(observed.line)
    if settings.sandbox_runtime != GVISOR or observed.gvisor is True:
        return
    provider.stop()
    if observed.gvisor is False:
        raise RuntimeUnverified(
            f"the engine was told to run the container under gVisor ({GVISOR}) but it runs on the host's kernel "
            f"({observed.evidence}); check the engine's runtimes ({engine().kind} info)"
        )
    raise RuntimeUnverified(
        f"cannot verify the runtime: the container is meant for gVisor ({GVISOR}) but this host cannot see its "
        f"processes ({observed.evidence}); run the Hub's workers as root on the engine's own host, or set "
        "OPENENV_HUB_SANDBOX_RUNTIME=runc if gVisor is not wanted"
    )


def grant(settings: HubSettings, declared: Any) -> tuple[dict[str, Any], list[str]]:
    """What a container gets of what its env declares (`openenv.declared.Declared`): the declared
    CPU and memory, capped by the Hub's limits; returns run options that replace the defaults,
    and one line per decision for the log."""
    notes: list[str] = []
    options: dict[str, Any] = {}
    resources = getattr(declared, "resources", None)
    if resources is not None:
        cap_mb, cap_cpu = _bytes(settings.smoke_memory) >> 20, settings.smoke_cpus
        memory_mb, cpus = min(resources.memory_mb, cap_mb), min(resources.cpu, cap_cpu)
        options = {"mem_limit": f"{memory_mb}m", "memswap_limit": f"{memory_mb}m", "nano_cpus": int(cpus * 1e9)}
        if settings.sandbox_runtime == GVISOR:  # there the process cap follows the memory (runc's does not)
            options.update(_process_limits(settings, memory_mb))
        capped = " (capped by the Hub's limits)" if (memory_mb, cpus) != (resources.memory_mb, resources.cpu) else ""
        notes.append(
            f"declared resources: {resources.cpu:g} cpu, {resources.memory_mb} MB; granted {cpus:g} cpu, {memory_mb} MB{capped}"
        )
    network = getattr(declared, "network", None)
    if network is not None:
        if network.mode == "no-network" or not settings.smoke_isolated_network:
            notes.append(
                f"declared network: {network.mode}; granted"
                + (" (the sandbox reaches nothing)" if network.mode == "no-network" else "")
            )
        else:
            notes.append(
                f"declared network: {network.mode}; not granted: the Hub's sandbox reaches nothing beyond the server's own port"
            )
    return options, notes


def confined_provider(
    settings: HubSettings,
    image: str,
    *,
    startup_timeout_s: float,
    read_only: bool = True,
    labels: dict[str, str] | None = None,
    port: int = 8000,
    overrides: dict[str, Any] | None = None,
    on: ContainerEngine | None = None,
    client: Any = None,
    bridge: str = BRIDGE_NAME,
) -> Any:
    """A ContainerProvider for `image`, whose server listens on `port` in the container, with every
    confinement above (smoke tests and play sessions); `overrides` replace resource limits (see
    `grant`). `on` names another engine than the Hub's own (its smoke bridge then `bridge`), and
    `client` a client of it of the caller's own (default: the engine's shared one)."""
    from openenv.client.providers import ContainerProvider
    from openenv.engines import engine

    eng = on if on is not None else engine()
    client = client if client is not None else eng.client()
    network = ensure_smoke_network(client, bridge=bridge, on=eng) if settings.smoke_isolated_network else None
    return ContainerProvider(
        image,
        port=port,
        pull="never",
        startup_timeout_s=startup_timeout_s,
        env=dict(SMOKE_ENV),
        user=SMOKE_USER,
        run_options={**smoke_run_options(settings, network, read_only=read_only), **(overrides or {})},
        labels={**(labels or {}), HUB_LABEL: hub_instance(settings)},
        runtime=settings.sandbox_runtime,
        docker_client=client,
        engine=eng,
    )


def hub_instance(settings: HubSettings) -> str:
    """Which Hub this is, as a label value: a digest of its database URL (its workers share it)."""
    return hashlib.sha256(settings.sqlalchemy_url.encode()).hexdigest()[:16]


def reap_leftovers(settings: HubSettings) -> int:
    """Remove this Hub's containers whose starting process is gone (on this host), and the firewall
    chains of Hub processes that are gone; returns how many containers. Containers of live workers
    and play sessions, and of other hosts, are left alone."""
    from hub_service.firewall import collect_leftovers
    from openenv.client.providers import lifecycle

    for chain in collect_leftovers():  # firewall chains of Hub processes killed outright
        log.info("removed the firewall chain %s of a Hub process that is gone", chain)
    try:
        removed = lifecycle.gc(labels={HUB_LABEL: hub_instance(settings)})
    except Exception:  # the engine may be down: the next start tries again
        log.warning("could not look for leftover containers of this Hub", exc_info=True)
        return 0
    for item in removed:
        log.info("removed leftover %s %s (its process %s is gone)", item.kind, item.name, item.owner)
    return len(removed)


def block_host_from_default_bridge() -> None:
    """Keep containers on the engine's default bridge (where builds' RUN steps run when they may
    reach the network) from opening connections to the host's own services.

    BuildKit in docker 20.10 offers RUN steps only the networks `default`, `none` and `host`, so the
    rule goes on the default bridge (docker0): the internet stays reachable (it is forwarded, not
    delivered to the host), replies to connections the host opens stay allowed."""
    from openenv.engines import engine

    eng = engine()
    if not eng.local:  # its bridge is another machine's: the build log names what is not enforced
        return
    with _lock:
        bridge = _default_bridge.get(eng.key)
        if bridge is None:
            try:
                bridge = eng.default_bridge(eng.client())
            except Exception as exc:  # no engine: the build fails on its own, with a clearer message
                log.warning("cannot look up the engine's default bridge to keep builds off the host: %s", exc)
                return
            if bridge is None:
                log.warning("the %s has no default bridge to keep builds off the host", eng.label)
                return
            _default_bridge[eng.key] = bridge
    _block_host_access(bridge)


def build_limits(settings: HubSettings) -> dict[str, Any]:
    """`container_limits` for the build's RUN steps (memory in bytes; the legacy builder's knobs)."""
    memory = _bytes(settings.build_memory)
    return {"memory": memory, "memswap": memory}


def build_options(settings: HubSettings) -> dict[str, Any]:
    """`build_image` keyword arguments that confine a build: memory, processes, disk written while
    it runs (the image cap), and its network: none unless the operator allows egress or names one."""
    from openenv.client.providers import lifecycle
    from openenv.images import NetworkProbe

    network = settings.build_network or (None if settings.build_egress else "none")
    if network is None and settings.build_block_host:
        block_host_from_default_bridge()
    return {
        "container_limits": build_limits(settings),
        "network_mode": network,
        "pids_limit": settings.build_pids,
        "disk_limit_mb": settings.image_max_mb,
        "offline": network == "none" and settings.build_network is None,  # the policy, not an outage
        # the container that checks the build's network after a failed step: the Hub's own image,
        # under the sandbox runtime, known to the reaper
        "network_probe": NetworkProbe(
            runtime=settings.sandbox_runtime, labels=lifecycle.owner_labels(extra={HUB_LABEL: hub_instance(settings)})
        ),
    }


def _bytes(size: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    size = size.strip().lower()
    if size[-1] in units:
        return int(float(size[:-1]) * units[size[-1]])
    return int(size)
