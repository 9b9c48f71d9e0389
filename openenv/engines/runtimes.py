"""Container runtimes (the OCI runtime an engine starts a container with: runc, gVisor's runsc):
which ones the engine has, and which one a running container really got.

An engine runs a container under whatever runtime it is told, and records that name; the record is
a claim. `observed_runtime` checks it from this host: a container under gVisor has, as its first
process on the host, the runsc binary itself (its sandbox, with the container's programs running
on gVisor's kernel inside it); under runc the first process is the image's own program on the
host's kernel. The check compares the executable's device and inode with the runsc the engine
was given, so an image cannot pass by naming its program `runsc`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from openenv.errors import ProviderUnavailableError

__all__ = ["GVISOR", "ObservedRuntime", "engine_runtimes", "observed_runtime", "require_runtime"]

GVISOR = "runsc"  # the name scripts/docker-engine registers gVisor under


def engine_runtimes(api: Any, engine_info: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The runtimes the engine knows, by name (`docker info`'s Runtimes: path and runtimeArgs),
    from `engine_info` when the caller has it already."""
    found = (engine_info if engine_info is not None else api.info()).get("Runtimes") or {}
    return {str(name): dict(spec or {}) for name, spec in found.items()}


def require_runtime(api: Any, name: str) -> dict[str, Any]:
    """The engine's record of runtime `name`.

    Raises:
        ProviderUnavailableError: the engine has no such runtime (says how to register gVisor's).
    """
    runtimes = engine_runtimes(api)
    if name in runtimes:
        return runtimes[name]
    hint = (
        "bash scripts/docker-engine installs gVisor and registers it as 'runsc'"
        if name == GVISOR
        else f'register it in the engine\'s daemon.json under "runtimes", or pick one of {sorted(runtimes)}'
    )
    raise ProviderUnavailableError(
        f"the container engine has no runtime {name!r} (it has {', '.join(sorted(runtimes)) or 'none'}); {hint}"
    )


@dataclass(frozen=True)
class ObservedRuntime:
    """What a running container runs under.

    Attributes:
        claimed: the runtime the engine says it used (its HostConfig.Runtime).
        gvisor: True when this host saw the container's first process be gVisor's sandbox, False
            when it saw the image's own program there, None when it could not look (a remote engine).
        evidence: one line that says what was seen, for a log.
    """

    claimed: str
    gvisor: bool | None
    evidence: str

    @property
    def line(self) -> str:
        kernel = {True: "gVisor's kernel", False: "the host's kernel", None: "not checked from this host"}[self.gvisor]
        return f"container runtime: {self.claimed} ({kernel}; {self.evidence})"


def observed_runtime(api: Any, container_id: str, engine: Any) -> ObservedRuntime:
    """Which runtime container `container_id` really runs under, checked on this host where it can
    be (`openenv.engines.host.view`); `engine` is the `ContainerEngine` that `api` reaches."""
    from openenv.engines.host import view

    info = api.inspect_container(container_id)
    claimed = str((info.get("HostConfig") or {}).get("Runtime") or "")
    engine_info = api.info()  # asked once: the runtimes and the default
    runtimes = engine_runtimes(api, engine_info)
    if claimed not in runtimes:  # Podman says "oci": the engine's default runtime
        claimed = str(engine_info.get("DefaultRuntime") or claimed or "runc")
    here = view(engine, info)
    if not here.seen:
        return ObservedRuntime(claimed, None, f"{here.unseen}; the engine's word is all there is")
    pid = here.pid
    try:
        seen = os.stat(f"/proc/{pid}/exe")
    except OSError:  # the process is gone
        return ObservedRuntime(claimed, None, f"process {pid} is not visible here; the engine's word is all there is")
    runsc_path = str(runtimes.get(GVISOR, {}).get("path") or shutil.which(GVISOR) or "")
    try:
        runsc = os.stat(runsc_path) if runsc_path else None
    except OSError:
        runsc = None
    if runsc is not None and (seen.st_dev, seen.st_ino) == (runsc.st_dev, runsc.st_ino):
        return ObservedRuntime(claimed, True, f"its first process on this host, pid {pid}, is {runsc_path}")
    return ObservedRuntime(claimed, False, f"its first process on this host, pid {pid}, is the image's own program")
