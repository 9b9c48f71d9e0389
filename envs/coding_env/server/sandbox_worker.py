"""The sandboxed interpreter: `python -s -B sandbox_worker.py <config: marshal, hex>`.

Started by `sandbox.Sandbox` in a new session (its own process group). It confines itself (see
`confine`), reports which layers hold, then runs the cells the server sends, one at a time, in
one persistent namespace. Standard library only; everything is imported before the lock-down,
because afterwards the server's folders are unreadable.

Channels: the server's pipes arrive as stdin/stdout and are moved to private descriptors at once;
fd 0 becomes /dev/null and fds 1/2 point, per cell, at fresh `out`/`err` files in the session's
I/O folder, so output written by the cell, by C code or by child processes is all captured and
the server reads it even after killing a runaway cell. Messages are a 4-byte big-endian length
and a body: the cell's source (UTF-8) from the server, a JSON object back.

It starts once per fresh-interpreter step, so it imports little: no json, re, enum or traceback
(the last only when a cell raises); replies are simple enough to write by hand.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import marshal
import os
import resource
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import confine

sys.path.pop(0)

_HEADER = struct.Struct(">I")


_SIGKILL = 9


def _json(value: object) -> str:
    """JSON for the few shapes replies use: dicts, bools, ints, None and strings."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json(str(k))}:{_json(v)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    text = "".join(c if c >= " " and c not in '"\\' else " " for c in str(value))
    return f'"{text}"'


def _send(fd: int, obj: dict) -> None:
    data = _json(obj).encode()
    os.write(fd, _HEADER.pack(len(data)) + data)


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int) -> str:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return _read_exact(fd, size).decode("utf-8", errors="replace")


def _redirect(io_dir: str) -> None:
    """Point fds 1 and 2 at new, empty `out`/`err` files for the next cell."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    for fd, name in ((1, "out"), (2, "err")):
        path = os.path.join(io_dir, name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        new = os.open(path, flags, 0o600)
        os.dup2(new, fd)  # dup2 makes fd 1/2 inheritable again, as child processes need
        os.close(new)


def _cpu_for_next_cell(seconds: int) -> None:
    """Let the next cell use `seconds` more CPU (SIGXCPU after), within the lifetime budget."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _confine(cfg: dict) -> dict:
    """Apply every layer; returns what holds. Raises ConfinementError when a required one fails."""
    limits = cfg["limits"]
    os.nice(10)  # below the server, which must keep answering while sandboxes spin
    confine.apply_rlimits(
        cpu_s=limits["cpu_s"],
        memory_bytes=limits["memory_bytes"],
        file_bytes=limits["file_bytes"],
        processes=limits["processes"],
        open_files=limits["open_files"],
    )
    layers: dict = {"rlimits": True, "own_uid": False, "landlock_abi": 0, "seccomp": False}
    if cfg.get("uid") is not None and os.getuid() == 0:
        confine.drop_privileges(cfg["uid"], cfg["gid"])
        layers["own_uid"] = True
    confine.set_parent_death_signal(_SIGKILL)
    if os.getppid() != cfg["parent_pid"]:  # the server died before the line above took effect
        raise confine.ConfinementError(3, "the server exited during start-up")
    confine.set_no_new_privs()
    if cfg.get("landlock", True):
        try:
            layers["landlock_abi"] = confine.apply_landlock(cfg["read_paths"], cfg["write_paths"], cfg["rw_files"])
        except confine.ConfinementError:
            if cfg.get("require_landlock"):
                raise
    # Without Landlock's signal scoping (ABI 6) and without a uid of its own, only seccomp keeps
    # the sandbox from signalling the server: deny signals to anyone then.
    scoped = layers["landlock_abi"] >= 6
    confine.apply_seccomp(deny_signals=not (scoped or layers["own_uid"]))
    layers["seccomp"] = True
    return layers


def _run_cell(code: str, namespace: dict, out: io.TextIOWrapper, err: io.TextIOWrapper) -> int:
    """Execute one cell like `python -c`: returns its exit code (uncaught exception: 1)."""
    sys.stdout, sys.stderr = out, err
    try:
        exec(compile(code, "<cell>", "exec"), namespace)
        return 0
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code & 0xFF
        print(exc.code, file=err)
        return 1
    except BaseException as exc:  # the cell's own error: report it as Python would, then go on
        import traceback

        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # drop this frame
        traceback.print_exception(type(exc), exc, tb, file=err)
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr, out, err):
            with contextlib.suppress(Exception):  # a cell may have closed or replaced its streams
                stream.flush()
        sys.stdout, sys.stderr = out, err


def main() -> None:
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))  # written by the server (trusted), never by a cell
    ctrl_in, ctrl_out = os.dup(0), os.dup(1)  # private (close-on-exec) copies of the server's pipes
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    io_dir = cfg["io_dir"]
    _redirect(io_dir)
    try:
        layers = _confine(cfg)
    except (confine.ConfinementError, OSError) as exc:
        _send(ctrl_out, {"error": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    os.chdir(cfg["home"])
    os.environ.clear()
    os.environ.update(cfg["environ"])
    out = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    err = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
    sys.argv = ["<cell>"]
    me = os.getpid()
    _send(ctrl_out, {"ready": True, "layers": layers, "pid": me})
    while True:
        try:
            source = _recv(ctrl_in)
        except EOFError:  # the server closed the session
            os._exit(0)
        _redirect(io_dir)
        _cpu_for_next_cell(cfg["limits"]["cell_cpu_s"])
        code = _run_cell(source, namespace, out, err)
        if os.getpid() != me:  # a child the cell forked came back here: it must not answer
            os._exit(code)
        _send(ctrl_out, {"exit_code": code})


if __name__ == "__main__":
    main()
