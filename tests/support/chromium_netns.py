#!/usr/bin/env python3
"""Chromium in a network namespace of its own, reaching 127.0.0.1 through a SOCKS5 relay.

Playwright launches this file as if it were Chromium (`executable_path`); the real binary is named
by OPENENV_TEST_CHROMIUM. Why: Chromium cancels every request in flight (ERR_NETWORK_CHANGED) when
the addresses of its network namespace change, and on a test machine the Docker engine adds and
removes bridges all the time. In a namespace holding only its own loopback nothing changes.

How: one thread leaves the machine's namespace for a new one (unshare), brings its loopback up,
listens there on 127.0.0.1 and starts Chromium (which inherits that namespace) with that listener as
its SOCKS5 proxy for every address, loopback included. Each connection Chromium opens is carried
by a thread that has returned to the machine's namespace (setns) and connects there, to 127.0.0.1
only: any other destination is refused, as the tests' network rule says. Stdlib only; needs root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the browser closed the connection mid-handshake")
        data += chunk
    return data


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy until `src` ends, then end `dst`'s sending side (HTTP half-closes)."""
    with contextlib.suppress(OSError):
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _serve(conn: socket.socket, host_ns: int) -> None:
    """One SOCKS5 CONNECT from Chromium, carried out in the machine's namespace."""
    _check(_libc.setns(host_ns, CLONE_NEWNET), "setns back to the machine's network namespace")
    upstream = None
    try:
        _, methods = _read(conn, 2)
        _read(conn, methods)
        conn.sendall(b"\x05\x00")  # no authentication
        _, cmd, _, kind = _read(conn, 4)
        if kind == 1:
            host = socket.inet_ntoa(_read(conn, 4))
        elif kind == 3:
            host = _read(conn, _read(conn, 1)[0]).decode()
        else:
            host = socket.inet_ntop(socket.AF_INET6, _read(conn, 16))
        (port,) = struct.unpack("!H", _read(conn, 2))
        if cmd != 1 or host not in ("127.0.0.1", "localhost"):
            conn.sendall(b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00")  # not allowed
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
            upstream.settimeout(None)
        except OSError:
            conn.sendall(b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00")  # connection refused
            return
        conn.sendall(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
        back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
        back.start()
        _pipe(conn, upstream)
        back.join()
    except (OSError, ValueError):
        pass
    finally:
        conn.close()
        if upstream is not None:
            upstream.close()


def main() -> int:
    chromium = os.environ.get("OPENENV_TEST_CHROMIUM", "/usr/bin/chromium")
    host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    ready = threading.Event()
    outcome: dict[str, object] = {}

    def isolated() -> None:
        # Only this thread (and what it starts) moves to the new namespace.
        try:
            _check(_libc.unshare(CLONE_NEWNET), "unshare a network namespace")
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
            listener = socket.create_server(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            proxy = [f"--proxy-server=socks5://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>"]
            outcome["proc"] = subprocess.Popen(
                [chromium, *proxy, *sys.argv[1:]],
                pass_fds=(3, 4) if _open(3) and _open(4) else (),
                preexec_fn=lambda: _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL),
            )
        except BaseException as exc:
            outcome["error"] = exc
            ready.set()
            return
        ready.set()
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_serve, args=(conn, host_ns), daemon=True).start()

    threading.Thread(target=isolated, daemon=True).start()
    ready.wait()
    if "error" in outcome:
        print(f"chromium_netns: {outcome['error']}", file=sys.stderr)
        return 1
    proc = outcome["proc"]
    assert isinstance(proc, subprocess.Popen)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    return proc.wait()


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
