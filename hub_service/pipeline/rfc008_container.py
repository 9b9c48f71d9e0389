"""RFC 008's measurements of an env's container, made by the Hub on each revision's running smoke
container: `runtime.network_policy`, `runtime.host_containment`, `runtime.resource_bounds`,
`runtime.oracle_containment` and `semantic.resource_envelope`.

Evidence comes only from what the container cannot shape: the kernel's view on the engine's host
(the container's cgroup, its processes' status in the host's /proc, its network namespace entered by
the Hub's own Python: `openenv.engines.netns`) and sinks the Hub owns, read only where the engine port
says this host holds them (`openenv.engines.host.view`). Where the Hub cannot look (the engine
runs on another host, the Hub is not root, gVisor keeps the processes in its own kernel) a check
says `skip` and why, never `pass`; what the Hub itself did not enforce (its isolation turned off, no
limit set) is never the env's failure: the check skips and names the setting.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_service.sandbox import SMOKE_USER
from hub_service.settings import HubSettings
from openenv.engines.host import Cgroup, view
from openenv.engines.netns import probe_from
from openenv.validation.rfc008 import ResultV2
from openenv.validation.rfc008.manifest import NormalizedManifest

__all__ = ["ContainerMeasures", "grade_no_network", "measure_network"]

_MB = 1 << 20


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


@dataclass
class ContainerMeasures:
    """The Hub's measurements of one running smoke container. `begin_episodes` and `end_episodes`
    bracket the runtime and semantic levels' episodes (the envelope); `results` gives the five checks."""

    settings: HubSettings
    api: Any
    container: str
    gvisor: bool
    info: dict[str, Any] = field(default_factory=dict)
    cgroup: Cgroup | None = None
    pid: int = 0
    unseen: str | None = None  # why this host cannot see the container (None: it can)
    _span: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: HubSettings, provider: Any, *, gvisor: bool) -> ContainerMeasures:
        api = provider.client.api
        info = api.inspect_container(provider.container_id)
        seen = view(provider.engine, info)
        return cls(settings, api, info["Id"], gvisor, info, seen.cgroup, seen.pid, seen.unseen)

    def begin_episodes(self) -> None:
        if self.cgroup is not None:
            self._span = {"t": time.monotonic(), "cpu": self.cgroup.cpu_seconds() or 0.0}

    def end_episodes(self) -> None:
        if self.cgroup is not None and self._span:
            self._span["wall"] = time.monotonic() - self._span["t"]
            self._span["cpu"] = (self.cgroup.cpu_seconds() or 0.0) - self._span["cpu"]

    def results(self, manifest: NormalizedManifest | None, folder: Path | None = None) -> list[ResultV2]:
        """The five checks; `folder` is the revision's package (where its declared oracle is)."""
        out = []
        for check_id, grade in (
            ("runtime.network_policy", self._network),
            ("runtime.host_containment", self._containment),
            ("runtime.resource_bounds", self._bounds),
            ("runtime.oracle_containment", lambda m: self._oracle(m, folder)),
            ("semantic.resource_envelope", self._envelope),
        ):
            started = time.perf_counter()
            try:
                graded = grade(manifest)
            except Exception as exc:  # a fault of the measurement: never a pass
                graded = _skip(f"the Hub's measurement failed: {type(exc).__name__}: {exc}")
            out.append(ResultV2(check_id=check_id, duration_s=round(time.perf_counter() - started, 4), **graded))
        return out

    # -- the checks -------------------------------------------------------------------------

    def _unseen(self) -> str | None:
        if self.unseen is not None or self.cgroup is None:
            return f"{self.unseen or 'the container is not visible from the Hub host'}: nothing measured"
        return None

    def _network(self, manifest: NormalizedManifest | None) -> dict[str, Any]:
        declared = manifest.network.mode if manifest is not None else "public"
        mode = str((self.info.get("HostConfig") or {}).get("NetworkMode") or "")
        if declared == "allowlist":
            return _skip("an allowlist is not measured by this Hub (its sandbox grants no egress at all)")
        if declared == "public":
            return _skip(
                "declared public: the Hub's sandbox grants no egress, so what the env reaches outside is not measured here"
            )
        if not self.settings.smoke_isolated_network:
            return _skip(
                "this Hub runs smoke containers on an open network (its setting smoke_isolated_network is off)"
            )
        if self._unseen() or not self.pid:
            return _skip(self._unseen() or "the container has no process to measure")
        gateway = _gateway(self.info)
        evidence = measure_network(self.pid, gateway)
        return grade_no_network(evidence, mode)

    def _containment(self, manifest: NormalizedManifest | None) -> dict[str, Any]:
        host = self.info.get("HostConfig") or {}
        problems = []
        if host.get("Privileged"):
            problems.append("the container is privileged")
        for key in ("NetworkMode", "PidMode", "IpcMode", "UTSMode", "UsernsMode"):
            if str(host.get(key) or "") == "host":
                problems.append(f"it shares the host's namespace ({key} host)")
        binds = [m for m in self.info.get("Mounts") or [] if m.get("Type") == "bind"]
        problems += [f"the host's {m.get('Source')} is mounted at {m.get('Destination')}" for m in binds]
        if host.get("Devices"):
            problems.append(f"host devices are passed in: {[d.get('PathOnHost') for d in host['Devices']]}")
        unseen = self._unseen()
        measured: dict[str, Any] = {"privileged": bool(host.get("Privileged")), "bind_mounts": len(binds)}
        if unseen is None and not self.gvisor:
            seen = []
            for pid in self.cgroup.processes():  # type: ignore[union-attr]
                with contextlib.suppress(OSError):
                    st = _status(pid)
                    uids, caps, nnp = (
                        st.get("Uid", "").split(),
                        int(st.get("CapEff", "0"), 16),
                        st.get("NoNewPrivs", "0"),
                    )
                    seen.append(pid)
                    if "0" in uids:
                        problems.append(f"process {pid} ({st.get('Name', '?')}) runs as root (uids {' '.join(uids)})")
                    if caps:
                        problems.append(f"process {pid} ({st.get('Name', '?')}) holds capabilities {caps:#x}")
                    if nnp.strip() != "1":
                        problems.append(
                            f"process {pid} ({st.get('Name', '?')}) may gain privileges (no_new_privs unset)"
                        )
            measured["processes"] = len(seen)
            if not seen:
                unseen = "no process of the container was left to read"
        if problems:
            return dict(
                status="fail",
                measured=measured,
                evidence=problems[:20],
                remediation="the Hub ran this revision without its confinement: an operator must check the sandbox settings",
            )
        if self.gvisor:
            return dict(
                status="pass",
                measured={**measured, "kernel": "gVisor"},
                evidence=[
                    "not privileged, no host namespace, mount or device; its processes run in gVisor's own kernel, "
                    "not on the host's"
                ],
            )
        if unseen:
            return _skip(unseen, measured)
        return dict(
            status="pass",
            measured=measured,
            evidence=[
                f"each of its {measured['processes']} processes, read in the host's /proc, runs as a user other than "
                "root with no capabilities and no_new_privs set; not privileged, no host namespace, mount or device"
            ],
        )

    def _limits(self) -> tuple[dict[str, Any], str | None]:
        """The limits the kernel enforces on the container, or why they cannot be relied on."""
        unseen = self._unseen()
        if unseen:
            return {}, unseen
        cg = self.cgroup
        assert cg is not None
        memory, cpus, pids = cg.memory_limit(), cg.cpu_limit(), cg.pids_limit()
        measured = {
            "memory_limit_mb": round(memory / _MB, 1) if memory else None,
            "cpu_limit": round(cpus, 3) if cpus else None,
            "pids_limit": pids,
        }
        missing = [name for name, value in (("memory", memory), ("cpu", cpus), ("process", pids)) if not value]
        if missing:
            return measured, f"the Hub set no {', '.join(missing)} limit on the container (its smoke settings)"
        return measured, None

    def _bounds(self, manifest: NormalizedManifest | None) -> dict[str, Any]:
        measured, why = self._limits()
        if why:
            return _skip(why, measured)
        cg = self.cgroup
        assert cg is not None
        peak, kills = cg.memory_peak(), cg.oom_kills()
        state = self.api.inspect_container(self.container).get("State") or {}
        kills += int(bool(state.get("OOMKilled")) and not kills)
        measured.update(peak_memory_mb=round(peak / _MB, 1) if peak else None, oom_kills=kills)
        declared = manifest.resources if manifest is not None else None
        lines = [
            f"the kernel bounds it to {measured['memory_limit_mb']} MB, {measured['cpu_limit']} CPU and "
            f"{measured['pids_limit']} processes"
            + (f" (declared: {declared.memory_mb} MB, {declared.cpu:g} CPU)" if declared else "")
        ]
        if kills:
            return dict(
                status="fail",
                measured=measured,
                evidence=[*lines, f"the kernel killed {kills} of its processes for memory, at the limit"],
                remediation="declare the memory the server needs (validation.resources.memory_mb), or use less",
            )
        lines.append(f"peak memory {measured['peak_memory_mb']} MB (page cache included); no process killed for memory")
        return dict(status="pass", measured=measured, evidence=lines)

    def _envelope(self, manifest: NormalizedManifest | None) -> dict[str, Any]:
        if manifest is None:
            return _skip("no resources are declared (validation.resources)")
        measured, why = self._limits()
        if why:
            return _skip(why, measured)
        if "wall" not in self._span:
            return _skip("the runtime and semantic levels' episodes were not played here")
        cg = self.cgroup
        assert cg is not None
        declared = manifest.resources
        peak = cg.memory_peak() or 0
        wall, cpu = self._span["wall"], self._span["cpu"]
        disk = self._disk_mb()
        measured = {
            "episodes_wall_s": round(wall, 3),
            "episodes_cpu_s": round(cpu, 3),
            "peak_memory_mb": round(peak / _MB, 1),
            "disk_written_mb": disk,
        }
        problems = []
        if peak > declared.memory_mb * _MB:
            problems.append(f"peak memory {measured['peak_memory_mb']} MB is over the declared {declared.memory_mb} MB")
        if cpu > declared.cpu * wall + 0.5:  # a scheduling tick's slack
            problems.append(f"{cpu:.2f} CPU-seconds in {wall:.2f} s is more than the declared {declared.cpu:g} CPU")
        if disk is not None and disk > declared.disk_mb:
            problems.append(f"{disk} MB written is over the declared {declared.disk_mb} MB of disk")
        summary = (
            f"the runtime and semantic levels' episodes: {wall:.2f} s, {cpu:.2f} CPU-seconds, peak memory since start "
            f"{measured['peak_memory_mb']} MB, "
            + (
                f"{disk} MB written"
                if disk is not None
                else "disk unmeasured (gVisor keeps its files in its own kernel)"
            )
        )
        if problems:
            return dict(
                status="fail",
                measured=measured,
                evidence=[*problems, summary],
                remediation="declare what an episode needs in validation.resources, or make it need less",
            )
        return dict(status="pass", measured=measured, evidence=[summary + ", within what it declares"])

    def _oracle(self, manifest: NormalizedManifest | None, folder: Path | None) -> dict[str, Any]:
        oracle = manifest.capabilities.oracle if manifest is not None else None
        if oracle is None or folder is None:
            return _skip("no oracle is declared (validation.capabilities.oracle): nothing to keep from the agent")
        try:
            wanted = _package_file(folder, oracle.location)
        except OSError as exc:
            return _skip(f"the declared oracle {oracle.location} cannot be read ({exc})")
        roots = self._file_roots()
        if not roots:
            return _skip(self._unseen() or "the container's files are not visible from the Hub's host")
        digest, size = hashlib.sha256(wanted).digest(), len(wanted)
        found: list[str] = []
        files = 0
        budget = [_MAX_ENTRIES]
        for root, prefix in roots:
            for path, shown, readable in _files_of_size(root, prefix, size, budget):
                files += 1
                with contextlib.suppress(OSError):
                    if readable and hashlib.sha256(path.read_bytes()).digest() == digest:
                        found.append(shown)
        if budget[0] <= 0 and not found:  # a look cut short proves nothing: never a pass
            return _skip(f"the container holds over {_MAX_ENTRIES:,} files: the Hub stopped looking for the oracle")
        measured = {
            "oracle": oracle.location,
            "oracle_bytes": size,
            "same_size_files": files,
            "readable_copies": found[:20],
        }
        if found:
            return dict(
                status="fail",
                measured=measured,
                evidence=[
                    f"the oracle ({oracle.location}) is in the container at {', '.join(found[:5])}, readable by the "
                    f"user the env runs as ({SMOKE_USER})"
                ],
                remediation="keep validation/ out of the image: add it to .dockerignore (or copy only what the server needs)",
            )
        return dict(
            status="pass",
            measured=measured,
            evidence=[
                f"no file the env's user ({SMOKE_USER}) can read in the container's filesystem holds the declared "
                f"oracle ({oracle.location}, {size} bytes; compared by content)"
            ],
        )

    def _file_roots(self) -> list[tuple[Path, str]]:
        """Where the container's files are on this host: its root as the engine assembled it (under
        runc and gVisor alike), and the /tmp the Hub mounts (runc: through the process's root); none
        when this host cannot see the container (a folder of that name here would be someone else's)."""
        roots: list[tuple[Path, str]] = []
        if self._unseen():
            return roots
        merged = ((self.info.get("GraphDriver") or {}).get("Data") or {}).get("MergedDir")
        if merged and Path(merged).is_dir():
            roots.append((Path(merged), ""))
        elif self.pid and not self.gvisor and Path(f"/proc/{self.pid}/root").is_dir():
            roots.append((Path(f"/proc/{self.pid}/root"), ""))
        if roots and self.pid and not self.gvisor and Path(f"/proc/{self.pid}/root/tmp").is_dir():
            roots.append((Path(f"/proc/{self.pid}/root/tmp"), "/tmp"))
        return roots

    def _disk_mb(self) -> float | None:
        """What the container wrote: its writable layer and its /tmp (a tmpfs the Hub mounts)."""
        if self.gvisor or not self.pid or self._unseen():
            return None
        listed = self.api.containers(all=True, size=True, filters={"id": self.container})
        written = int((listed[0] if listed else {}).get("SizeRw") or 0)

        with contextlib.suppress(OSError):
            st = os.statvfs(f"/proc/{self.pid}/root/tmp")
            written += (st.f_blocks - st.f_bfree) * st.f_frsize
        return round(written / _MB, 1)


def _package_file(folder: Path, rel: str) -> bytes:
    """A file of the revision's package, never one outside it (a link out, `..`), at most 1 MB."""
    base = folder.resolve()
    path = (base / rel).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        raise OSError(f"no such file in the package: {rel}")
    if path.stat().st_size > _MB:
        raise OSError(f"{rel} is over 1 MB")
    return path.read_bytes()


_AGENT_UID, _AGENT_GID = (int(x) for x in SMOKE_USER.split(":"))
_PSEUDO = {"proc", "sys", "dev"}


def _may(st: os.stat_result, read: int) -> bool:
    """Whether the env's user (SMOKE_USER) has permission `read` (4: read, 1: search) on a file."""
    if st.st_uid == _AGENT_UID:
        return bool(st.st_mode & (read << 6))
    if st.st_gid == _AGENT_GID:
        return bool(st.st_mode & (read << 3))
    return bool(st.st_mode & read)


_MAX_ENTRIES = (
    500_000  # entries looked at in a container's files (an image filled with empty files must not stall the stage)
)


def _files_of_size(root: Path, prefix: str, size: int, budget: list[int]) -> Iterator[tuple[Path, str, bool]]:
    """Regular files under `root` of `size` bytes (links not followed, /proc, /sys and /dev left
    out), with the path the container sees and whether the env's user can read them; stops once
    `budget[0]` entries were looked at (it counts down)."""
    import stat

    todo = [(root, True)]
    while todo and budget[0] > 0:
        folder, reachable = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        budget[0] -= len(entries)
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if folder == root and not prefix and entry.name in _PSEUDO:
                    continue
                todo.append((Path(entry.path), reachable and _may(st, 1)))
            elif stat.S_ISREG(st.st_mode) and st.st_size == size:
                shown = prefix + "/" + str(Path(entry.path).relative_to(root))
                yield Path(entry.path), shown, reachable and _may(st, 4)


def _skip(why: str, measured: dict[str, Any] | None = None) -> dict[str, Any]:
    return dict(status="skip", measured=measured or {}, evidence=[why])


def _gateway(info: dict[str, Any]) -> str | None:
    networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
    for net in networks.values():
        if net.get("Gateway"):
            return str(net["Gateway"])
    return None


def _host_addresses() -> list[str]:
    """This host's IPv4 addresses outside loopback, from the kernel (SIOCGIFADDR)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
                address = socket.inet_ntoa(packed[20:24])
                if not address.startswith("127."):
                    found.append(address)
    return found


@contextlib.contextmanager
def _sinks(addresses: list[str]) -> Iterator[list[list[Any]]]:
    """A TCP listener and a UDP echo of the Hub's own on each address, for as long as the block
    runs; yields the probe targets."""
    stop = threading.Event()
    sockets: list[socket.socket] = []
    targets: list[list[Any]] = []
    try:
        for address in addresses:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tcp.bind((address, 0))
            tcp.listen(8)
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind((address, 0))
            udp.setblocking(False)
            sockets += [tcp, udp]
            targets += [["tcp", address, tcp.getsockname()[1]], ["udp", address, udp.getsockname()[1]]]

        def echo() -> None:
            datagrams = [s for s in sockets if s.type == socket.SOCK_DGRAM]
            while not stop.is_set():
                ready, _, _ = select.select(datagrams, [], [], 0.05)
                for s in ready:
                    with contextlib.suppress(OSError):
                        data, peer = s.recvfrom(64)
                        s.sendto(data, peer)

        thread = threading.Thread(target=echo, name="openenv-hub-netprobe-sink", daemon=True)
        thread.start()
        yield targets
        stop.set()
        thread.join(timeout=2)
    finally:
        for s in sockets:
            s.close()


def measure_network(pid: int, gateway: str | None) -> dict[str, Any]:
    """What the network namespace of process `pid` holds and reaches: TCP and UDP sinks of the
    Hub's own on the container's gateway (this host, as the container sees it) and on this host's
    other addresses, each probed from the namespace and, as the control, from the Hub's own.
    Returns the namespace's facts and `probes`: `[kind, address, port, subject, control]`."""
    others = sorted({a for a in _host_addresses() if a != gateway})
    addresses = ([gateway] if gateway else []) + others[: 4 - bool(gateway)]
    with _sinks(addresses) as targets:
        try:
            found = probe_from(pid, targets)
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            return {
                "error": f"the Hub could not enter the container's network namespace ({exc}); it needs root on the engine's host"
            }
    found["gateway"] = gateway
    return found


def grade_no_network(evidence: dict[str, Any], network_mode: str) -> dict[str, Any]:
    """`runtime.network_policy` for an env that declares `no-network`, from `measure_network`'s
    evidence. The Hub keeps one interface in the namespace, for its own connection to the server's
    published port; what counts is that nothing beyond it is reached."""
    if "error" in evidence:
        return _skip(str(evidence["error"]))
    counted = [p for p in evidence["probes"] if p[4] == "reachable"]
    measured = {
        "network_mode": network_mode,
        "interfaces": evidence["interfaces"],
        "default_route": evidence["default_route"],
        "ipv6_non_loopback": evidence["ipv6_non_loopback"],
        "listening_ports": evidence["listening_ports"],
        "probes": [
            {"kind": p[0], "to": f"{p[1]}:{p[2]}", "subject": p[3], "control": p[4]} for p in evidence["probes"]
        ],
    }
    reached = [
        f"{p[0]} to the Hub's sink at {p[1]}:{p[2]} was reachable from the env's namespace"
        for p in counted
        if p[3] == "reachable"
    ]
    if reached:
        return dict(
            status="fail",
            measured=measured,
            evidence=reached,
            remediation="run the env under its declared network mode: the sandbox let it reach the host's network",
        )
    if not any(p[0] == "tcp" for p in counted):
        return _skip("no TCP sink of the Hub's answered its own control probe: nothing proven", measured)
    return dict(
        status="pass",
        measured=measured,
        evidence=[
            f"declared no-network: {len(counted)} probes (TCP and UDP) to sinks of the Hub's own on this host, answered "
            "from the Hub's namespace, were all denied from the env's"
        ],
    )
