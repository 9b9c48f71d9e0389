"""Whose trouble a failed RUN step is: the machine's network, or the env's.

A container of an image the builder makes itself (`probe_image`: one program that waits, written
here byte by byte, nothing from any Space or registry) is started on the build's network, confined,
and the network namespace the engine gave it is entered by this host's own Python
(`openenv.engines.netns`), which asks the container's resolvers (from the resolv.conf the engine
wrote for it) for well-known names. Nothing the Space ships takes part: not its base image, not its
programs, not what its step printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import struct
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from openenv.images._errors import ImageBuildError

__all__ = ["PROBE_HOSTS", "NetworkProbe", "Probed", "network_trouble", "pause_program", "probe_image"]

# Names any build network that reaches the internet resolves.
PROBE_HOSTS = ("pypi.org", "deb.debian.org")
_LABEL = "org.openenv.probe"
_START_TIMEOUT_S = 20.0

# The program of the probe image: wait for signals for ever (killed when the probe is done), as a
# static ELF executable of one loadable segment. x86-64: `mov eax, 34 (pause); syscall; jmp back`.
# AArch64: `mov x0..x3, #0; mov x8, #73 (ppoll with nothing to poll); svc #0; b back`.
_CODE = {
    "x86_64": (0x3E, bytes.fromhex("b8220000000f05ebf7")),
    "aarch64": (
        0xB7,
        b"".join(
            struct.pack("<I", word)
            for word in (0xD2800000, 0xD2800001, 0xD2800002, 0xD2800003, 0xD2800928, 0xD4000001, 0x17FFFFFA)
        ),
    ),
}
_ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}


def pause_program(arch: str) -> bytes:
    """The probe image's one program for machine `arch` (as `uname -m` or the engine says it).

    Raises:
        KeyError: no program for this architecture.
    """
    machine, code = _CODE[_ARCH_ALIASES.get(arch, arch)]
    base, header, entry_header = 0x400000, 64, 56
    size = header + entry_header + len(code)
    elf = struct.pack(
        "<4sBBBB8xHHIQQQIHHHHHH",
        b"\x7fELF",
        2,  # 64-bit
        1,  # little-endian
        1,  # ELF version
        0,  # System V ABI
        2,  # an executable
        machine,
        1,
        base + header + entry_header,  # entry point: just past the headers
        header,  # program headers follow the ELF header
        0,
        0,
        header,
        entry_header,
        1,
        0,
        0,
        0,
    )
    segment = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)  # loaded, read + execute
    return elf + segment + code


def probe_image(client: Any) -> str:
    """The id of the probe image on this engine, built now (from scratch, no network) if the engine
    has none with the program's digest.

    Raises:
        KeyError: the engine's architecture has no probe program.
        Exception: the engine's own, when it cannot build or list images.
    """
    arch = str(client.info().get("Architecture") or "")
    program = pause_program(arch)
    digest = hashlib.sha256(program).hexdigest()
    tag = f"openenv-probe:pause-{digest[:16]}"
    try:
        image = client.images.get(tag)
        if (image.labels or {}).get(f"{_LABEL}.digest") == digest:
            return str(image.id)
    except Exception:  # not there yet (or not one of ours under that name): build it
        pass
    dockerfile = (
        f'FROM scratch\nCOPY pause /pause\nLABEL {_LABEL}.digest="{digest}"\nUSER 65534:65534\nENTRYPOINT ["/pause"]\n'
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data, mode in (("Dockerfile", dockerfile.encode(), 0o644), ("pause", program, 0o755)):
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode, entry.mtime = len(data), mode, 0
            tar.addfile(entry, io.BytesIO(data))
    context.seek(0)
    image, _ = client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, network_mode="none")
    return str(image.id)


@dataclass(frozen=True)
class NetworkProbe:
    """How the probe container is confined beyond its fixed limits (16 MiB, 8 processes, no
    capabilities, no new privileges, user 65534, read-only root): the runtime to run it under (the
    Hub's sandbox runtime) and labels (the Hub's reaper's: its owner's, `lifecycle.owner_labels`, so
    that a probe left by a process killed outright is removed)."""

    runtime: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


class Probed(NamedTuple):
    """What the probe found after a RUN step failed: `trouble` when the machine's network is down;
    `refused` when the engine could not start the probe's own container at all (no evidence either
    way otherwise); `note`, when the probe could not look, says why (for the build log)."""

    trouble: ImageBuildError | None
    refused: bool
    note: str | None = None


def network_trouble(
    client: Any, network_mode: str | None, log: str, *, offline: bool = False, probe: NetworkProbe | None = None
) -> Probed:
    """After a RUN step failed: is the build's network down? The probe container on that network
    asks its resolvers for well-known names; a resolver that does not answer (or answers that it
    failed) means the machine's network is down, not the env broken. An unknown name in the env's
    own step (a typo in its index URL) gets an answer ("no such name") from a working resolver and
    stays the env's failure. A build kept off the network on purpose (`offline`) asks nothing: its
    probe only shows whether the engine can start a container. Where the probe cannot look (not
    root on the engine's host, an engine on another host, no program for the machine) the step's
    failure stays the env's, and `note` says why."""
    from openenv.engines import engine_of
    from openenv.engines.host import view
    from openenv.engines.netns import probe_from
    from openenv.errors import ProviderUnavailableError

    probe = probe or NetworkProbe()
    try:
        eng = engine_of(client)
        runtime = eng.runtime_options(client.api, probe.runtime) if probe.runtime else {}
    except ProviderUnavailableError as exc:  # the operator's set-up: the revision waits for it
        return Probed(ImageBuildError(str(exc), log, reason=ImageBuildError.HOST_SETUP), refused=False)
    try:
        image = probe_image(client)
    except KeyError:
        return Probed(None, refused=False, note="the network probe has no program for this engine's machine")
    except Exception as exc:  # the engine could not make a from-scratch image: its trouble, if it lasts
        return Probed(None, refused=True, note=f"the engine could not make the network probe's image ({exc})")
    try:
        container = client.containers.run(
            image,
            detach=True,
            network_mode="none" if offline else network_mode or eng.default_network,
            mem_limit="16m",
            pids_limit=8,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            user="65534:65534",
            **runtime,
            labels={_LABEL: "network", **probe.labels},
        )
    except Exception as exc:  # the engine could not start a container of an image of its own making
        return Probed(None, refused=True, note=f"the engine could not start the network probe ({exc})")
    try:
        info = _running(client, container.id)
        if info is None:
            return Probed(None, refused=True, note="the network probe's container did not start running")
        if offline:
            return Probed(None, refused=False)
        nameservers = _nameservers(info)
        targets = [["dns", ns, 53, host] for host in PROBE_HOSTS for ns in nameservers or []]
        here = view(eng, info)
        if not here.seen:
            return Probed(None, refused=False, note=f"the build's network could not be checked ({here.unseen})")
        try:
            found = probe_from(here.pid, targets, control=False)
        except Exception as exc:
            return Probed(None, refused=False, note=f"the build's network could not be checked ({exc})")
        if nameservers:
            answered = {str(p[3]) for p in found["probes"] if p[4] == "reachable"}
            down = [host for host in PROBE_HOSTS if host not in answered]
            denied = sorted({str(p[4]).removeprefix("denied: ") for p in found["probes"] if p[4] != "reachable"})
            why = f"their resolvers {', '.join(nameservers)}: {'; '.join(denied)}"
        elif not found["default_route"]:  # no resolver to ask, and nowhere to send a question
            down, why = list(PROBE_HOSTS), "they have no resolver and no route out"
        else:
            return Probed(
                None, refused=False, note="the build's network could not be checked (no resolver of it is known here)"
            )
    finally:
        with contextlib.suppress(Exception):  # gone already, or the engine is going: the reaper's labels are on it
            container.remove(force=True)
    if not down:
        return Probed(None, refused=False)
    return Probed(
        ImageBuildError(
            f"the build could not reach the network: containers on the engine's build network cannot resolve "
            f"{', '.join(down)} ({why}); the build will be tried again",
            log,
            reason=ImageBuildError.NETWORK,
        ),
        refused=False,
    )


def _running(client: Any, ident: str) -> dict[str, Any] | None:
    """The container's inspection once it runs (None if it stopped or never ran within the time)."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        info: dict[str, Any] = client.api.inspect_container(ident)
        state = info.get("State") or {}
        if state.get("Running") and state.get("Pid"):
            return info
        if state.get("Status") in ("exited", "dead") or time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _nameservers(info: dict[str, Any]) -> list[str] | None:
    """The resolvers in the resolv.conf the engine wrote for the container (a file on the engine's
    host, outside the container's image); None when this host cannot read it."""
    path = info.get("ResolvConfPath")
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return [m.group(1) for m in re.finditer(r"^\s*nameserver\s+(\S+)", text, re.MULTILINE)][:3]
