"""A look into a container's network namespace by this host's own Python, never the container's.

`probe_from(pid, targets)` runs this file as a program (`python -I netns.py PID TARGETS [--no-control]`):
it enters the network namespace of process `pid` and says, as one JSON line, what that namespace holds
and what it reaches. TARGETS is a JSON list of `[kind, host, port]` (`tcp` or `udp`: sinks the caller
owns) or `["dns", nameserver, 53, name]` (a DNS question for `name`: `reachable` when the resolver
answers it, found or not). They are probed twice: first from the namespace the program starts in (the
caller's own: the control; `--no-control` leaves it out), then from the container's. Only the
namespace is entered: the program, its files and its view of /proc/net are this host's, so nothing the
container ships can shape the answer. Needs CAP_SYS_ADMIN (root) on the engine's host.

The program imports nothing of openenv's (it runs with `-I`, from any working folder).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import struct
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

CLONE_NEWNET = 0x40000000
TIMEOUT_S = 0.25  # local sinks answer in well under a millisecond; a drop says nothing at all
DNS_TIMEOUT_S = 1.5  # a resolver may ask further afield; the question is sent twice
_PROGRAM_TIMEOUT_S = 20.0


def enter(pid: int) -> None:
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns into the network namespace of process {pid}")
    os.close(fd)


def namespace() -> dict[str, object]:
    # /proc/net follows the reading thread's namespace: after setns it is the container's.
    with open("/proc/net/route") as f:
        routes = [line.split() for line in f.read().splitlines()[1:]]
    with open("/proc/net/if_inet6") as f:
        ipv6 = [line.split() for line in f.read().splitlines()]
    listening: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = [line.split() for line in f.read().splitlines()[1:]]
        except OSError:  # no IPv6 in this kernel
            continue
        listening.update(int(r[1].rsplit(":", 1)[1], 16) for r in rows if len(r) > 3 and r[3] == "0A")
    return {
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "default_route": any(len(r) > 2 and r[1] == "00000000" for r in routes),
        "ipv6_non_loopback": sum(1 for r in ipv6 if len(r) > 5 and r[5] != "lo"),
        "listening_ports": sorted(listening),
    }


def dns_question(name: str, ident: int) -> bytes:
    """A DNS query (recursion desired) for the A record of `name`."""
    labels = b"".join(bytes([len(part)]) + part.encode("ascii") for part in name.strip(".").split("."))
    return struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\x00" + struct.pack(">HH", 1, 1)


def ask_dns(nameserver: str, port: int, name: str) -> str:
    """`reachable` when the resolver answers the question (the name found or not), else `denied`
    and why (no answer, or a failure code: it could not ask further itself)."""
    family = socket.AF_INET6 if ":" in nameserver else socket.AF_INET
    ident = int.from_bytes(os.urandom(2), "big")
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(DNS_TIMEOUT_S)
        try:
            s.connect((nameserver, port))
            for _ in range(2):
                s.send(dns_question(name, ident))
                try:
                    while True:
                        reply = s.recv(512)
                        if len(reply) >= 12 and int.from_bytes(reply[:2], "big") == ident and reply[2] & 0x80:
                            code = reply[3] & 0x0F
                            return "reachable" if code in (0, 3) else f"denied: the resolver answered code {code}"
                except TimeoutError:
                    continue
        except ConnectionRefusedError:
            return "denied: nothing listens there"
        except OSError as exc:
            return f"denied: {exc.strerror or exc}"
    return "denied: no answer"


def probe(kind: str, host: str, port: int, name: str = "") -> str:
    """`reachable` (it answered, a refusal included: the packet got there), else `denied` and why."""
    if kind == "dns":
        return ask_dns(host, port, name)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if kind == "tcp":
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(TIMEOUT_S)
            try:
                s.connect((host, port))
            except ConnectionRefusedError:
                return "reachable"
            except TimeoutError:
                return "denied: no answer"
            except OSError as exc:
                return f"denied: {exc.strerror or exc}"
            return "reachable"
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(TIMEOUT_S)
        try:
            s.connect((host, port))
            s.send(b"openenv-hub-probe")
            s.recv(64)
        except TimeoutError:
            return "denied: no answer"
        except ConnectionRefusedError:
            return "reachable"
        except OSError as exc:
            return f"denied: {exc.strerror or exc}"
        return "reachable"


def probe_all(targets: list[list[object]]) -> list[str]:
    with ThreadPoolExecutor(max(1, len(targets))) as pool:
        return list(pool.map(lambda t: probe(str(t[0]), str(t[1]), int(str(t[2])), *map(str, t[3:4])), targets))


def probe_from(pid: int, targets: list[list[Any]], *, control: bool = True) -> dict[str, Any]:
    """Run this file as a program (by the running Python, isolated) against process `pid`'s network
    namespace: the namespace's facts, and `probes`, each `[*target, subject, control]` (control
    None with `control=False`).

    Raises:
        OSError: the namespace could not be entered (not root, no such process) or the program failed.
        subprocess.TimeoutExpired: it took longer than 20 s.
    """
    import subprocess

    argv = [sys.executable, "-I", __file__, str(pid), json.dumps(targets), *([] if control else ["--no-control"])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROGRAM_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise OSError((done.stderr.strip().splitlines() or ["no output"])[-1])
    try:
        return dict(json.loads(done.stdout))
    except ValueError as exc:
        raise OSError(f"the namespace probe printed no answer ({exc})") from None


def main() -> None:
    pid, targets = int(sys.argv[1]), json.loads(sys.argv[2])
    control = probe_all(targets) if "--no-control" not in sys.argv[3:] else [None] * len(targets)
    enter(pid)
    facts = namespace()
    subject = probe_all(targets)
    facts["probes"] = [[*t, s, c] for t, s, c in zip(targets, subject, control, strict=True)]
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
