"""Tries, at start-up, what a malicious Space would: find secrets, reach the network and the
host, fill the disk, fork-bomb. Prints one `PROBE name outcome` line per attempt; serves an
echo env afterwards so the smoke test can finish."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
import time
from typing import Any

from openenv import Environment, State, create_app

try:
    from ..models import EchoAction, EchoObservation
except ImportError:
    from models import EchoAction, EchoObservation  # type: ignore[no-redef]


def probe(name: str, outcome: str) -> None:
    # One write per line: Podman's log reader joins a line written apart from its newline to the next.
    sys.stdout.write(f"PROBE {name} {outcome}\n")
    sys.stdout.flush()


def _gateway() -> str | None:
    try:
        with open("/proc/net/route") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[1] == "00000000":
                    raw = int(fields[2], 16)
                    return socket.inet_ntoa(raw.to_bytes(4, "little"))
    except OSError:
        return None
    return None


def _connect(host: str, port: int) -> str:
    try:
        with socket.create_connection((host, port), timeout=2):
            return "connected"
    except TimeoutError:
        return "blocked-timeout"
    except OSError as exc:
        return f"blocked-{errno.errorcode.get(exc.errno or 0, type(exc).__name__)}"


def _kernel_log() -> str:
    """The kernel's log (what dmesg prints), first line: a container's own kernel answers under
    gVisor; the host's refuses an unprivileged reader."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(1 << 14)
        n = libc.klogctl(3, buf, len(buf))  # SYSLOG_ACTION_READ_ALL
    except (OSError, AttributeError) as exc:
        return f"blocked-{type(exc).__name__}"
    if n < 0:
        return f"blocked-{errno.errorcode.get(ctypes.get_errno(), '?')}"
    lines = buf.raw[:n].decode(errors="replace").splitlines()
    return lines[0] if lines else "empty"


def attack() -> None:
    with open("/proc/version") as f:
        probe("kernel", f.read().strip())
    probe("kernel-log", _kernel_log())
    env_dump = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
    probe("environ", env_dump.replace("\n", " "))
    try:
        with open("/proc/1/environ", "rb") as f:
            probe("pid1-environ", f.read().replace(b"\0", b" ").decode(errors="replace"))
    except OSError as exc:
        probe("pid1-environ", f"blocked-{type(exc).__name__}")
    probe("outside-ip", _connect("1.1.1.1", 53))
    try:
        socket.getaddrinfo("pypi.org", 443)
        probe("outside-dns", "resolved")
    except OSError:
        probe("outside-dns", "blocked")
    gateway = _gateway()
    probe("host-gateway", _connect(gateway, 22) if gateway else "no-gateway")
    for path, size in (("/fill.bin", 1 << 20), ("/tmp/fill.bin", 2 << 30)):
        written = 0
        try:
            with open(path, "wb") as f:
                chunk = b"\0" * (1 << 20)
                while written < size:
                    f.write(chunk)
                    written += len(chunk)
            probe(f"disk{path}", f"wrote-{written >> 20}MB")
        except OSError as exc:
            probe(f"disk{path}", f"stopped-at-{written >> 20}MB-{errno.errorcode.get(exc.errno or 0, '?')}")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
    children = []
    try:
        for _ in range(5000):
            pid = os.fork()
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            children.append(pid)
        probe("forkbomb", f"forked-{len(children)}")
    except OSError as exc:
        probe("forkbomb", f"stopped-at-{len(children)}-{errno.errorcode.get(exc.errno or 0, '?')}")
    for pid in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


class Env(Environment[EchoAction, EchoObservation, State]):
    def __init__(self) -> None:
        self._state = State(episode_id="x")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, timeout_s: float | None = None, **kw: Any) -> EchoObservation:
        return EchoObservation(echoed_message=action.message, message_length=len(action.message))

    @property
    def state(self) -> State:
        return self._state


attack()
app = create_app(Env, EchoAction, EchoObservation)
