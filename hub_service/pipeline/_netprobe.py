"""Run by the Hub's own Python, never the Space's: enter the network namespace of process `pid`
(argv[1]) and say, as one JSON line, what that namespace holds and what it reaches.

argv[2] is a JSON list of `[kind, host, port]` targets (`tcp` or `udp`, sinks the Hub owns). They
are probed twice: first from the namespace this program starts in (the Hub's own: the control),
then from the container's. Only the namespace is entered: the program, its files and its view of
/proc/net are this host's, so nothing the container ships can shape the answer. Needs CAP_SYS_ADMIN
(root) on the engine's host.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

CLONE_NEWNET = 0x40000000
TIMEOUT_S = 0.25  # local sinks answer in well under a millisecond; a drop says nothing at all


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


def probe(kind: str, host: str, port: int) -> str:
    """`reachable` (it answered, a refusal included: the packet got there), else `denied` and why."""
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
        return list(pool.map(lambda t: probe(str(t[0]), str(t[1]), int(str(t[2]))), targets))


def main() -> None:
    pid, targets = int(sys.argv[1]), json.loads(sys.argv[2])
    control = probe_all(targets)
    enter(pid)
    facts = namespace()
    subject = probe_all(targets)
    facts["probes"] = [[*t, s, c] for t, s, c in zip(targets, subject, control, strict=True)]
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
