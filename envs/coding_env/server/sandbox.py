"""The server side of the sandbox: a private folder, a uid, and sandboxed interpreter processes.

A `Sandbox` belongs to one episode. Each cell runs in a worker process (`sandbox_worker.py`)
that confines itself before it reads any code; a cell that asks to persist runs in the episode's
long-lived worker, any other in a fresh one that is killed right after. Everything is asyncio:
waiting on a cell never blocks the server's event loop, and a semaphore bounds how many cells
execute at once across all sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import marshal
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import procs
from .settings import SandboxSettings

__all__ = ["CellResult", "Sandbox", "SandboxError", "isolation_report", "preflight"]

log = logging.getLogger("coding_env")

WORKER = str(Path(__file__).with_name("sandbox_worker.py"))
_HEADER = struct.Struct(">I")
_START_TIMEOUT_S = 20.0
_MAX_REPLY_BYTES = 1 << 16
_SYSTEM_READ_PATHS = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
)


class SandboxError(RuntimeError):
    """The sandbox could not be set up (the message says what to fix); no code was run."""


@dataclass
class CellResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float
    restarted: bool


class _UidPool:
    """Hands out uids that no running process has, so sandboxes cannot touch each other."""

    def __init__(self) -> None:
        self._in_use: set[int] = set()
        self._next: int | None = None

    def take(self, base: int, count: int) -> int:
        if self._next is None:
            self._next = random.randrange(count)  # two servers on one host rarely collide
        busy = procs.uids_in_use()
        for _ in range(count):
            uid = base + self._next
            self._next = (self._next + 1) % count
            if uid not in self._in_use and uid not in busy:
                self._in_use.add(uid)
                return uid
        raise SandboxError(f"all {count} sandbox uids are in use; raise CODING_ENV_UID_COUNT")

    def give_back(self, uid: int) -> None:
        self._in_use.discard(uid)


_uids = _UidPool()
_parallel: dict[int, asyncio.Semaphore] = {}
_tracked: set[int] = set()  # pids of live workers: asyncio reaps these, procs.reap_orphans must not


_PROBE = "import json, sys; print(json.dumps([sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]))"


@functools.lru_cache(maxsize=4)
def sandbox_python(configured: str, as_root: bool) -> tuple[str, tuple[str, ...]]:
    """The interpreter that runs sandboxed code and the folders it must read; cached.

    The server's own interpreter when the sandbox uid can reach it (a Python under a private
    home, e.g. pyenv in /root, cannot be read once privileges are dropped), else the system's.

    Raises:
        SandboxError: no usable interpreter.
    """
    candidates = [configured] if configured else [sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]
    tried = []
    for exe in candidates:
        if not (exe and os.path.exists(exe)):
            tried.append(f"{exe}: no such file")
            continue
        try:
            out = subprocess.run(
                [exe, "-s", "-c", _PROBE], capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"}
            )
            prefixes = json.loads(out.stdout)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            tried.append(f"{exe}: {exc}")
            continue
        real = os.path.realpath(exe)
        paths = {*prefixes, os.path.dirname(real), *_SYSTEM_READ_PATHS}
        if as_root and not all(_world_reachable(p) for p in (real, *prefixes)):
            tried.append(f"{exe}: not readable by other users")
            continue
        return exe, tuple(sorted(p for p in paths if p and os.path.exists(p)))
    raise SandboxError(
        f"no Python interpreter the sandbox user can run (tried {'; '.join(tried) or 'none'}); "
        "install python3 under /usr or set CODING_ENV_PYTHON"
    )


def _world_reachable(path: str) -> bool:
    """Whether a user with no special rights can reach and read `path`."""
    p = Path(path).resolve()
    for parent in reversed(p.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(p).st_mode & stat.S_IROTH)


def isolation_report(settings: SandboxSettings) -> dict[str, Any]:
    """What the sandbox can use on this machine, for the state and the README's checks."""
    from . import confine  # ctypes is loaded only once a sandbox is asked about

    root = os.getuid() == 0
    abi = confine.landlock_abi()
    need_landlock = settings.require_landlock == "true" or (settings.require_landlock == "auto" and not root)
    return {
        "own_uid": root,
        "landlock_abi": abi,
        "seccomp": confine.seccomp_supported(),
        "landlock_required": need_landlock,
    }


def preflight(settings: SandboxSettings) -> dict[str, Any]:
    """Check that sandboxes can be made here; returns the isolation report. Blocking (it may start
    the interpreter once, to learn its folders): call it off the event loop.

    Raises:
        SandboxError: a required layer is missing or no interpreter is usable (the message says
            what to change).
    """
    report = isolation_report(settings)
    if report["landlock_required"] and report["landlock_abi"] < 1:
        raise SandboxError(
            "this kernel has no Landlock and the server is not root, so the sandbox could not keep code "
            "away from the server's files; run the server as root (in its container) or on Linux >= 5.13"
        )
    if not report["seccomp"]:
        raise SandboxError(f"no seccomp filter for this architecture ({os.uname().machine}); run on x86_64 or aarch64")
    sandbox_python(settings.python, report["own_uid"])
    return report


class _Worker:
    """One sandboxed interpreter process and its control pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, layers: dict[str, Any]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.layers = layers
        _tracked.add(proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def request(self, code: str) -> dict[str, Any]:
        """Send a cell's source; returns the worker's JSON reply."""
        data = code.encode("utf-8", errors="surrogatepass")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(_HEADER.pack(len(data)) + data)
        await self.proc.stdin.drain()
        return await self.read()

    async def read(self) -> dict[str, Any]:
        """The next reply. Code in the sandbox can write to this pipe too, so a reply that is not
        a JSON object counts as the worker breaking down (ConnectionError)."""
        assert self.proc.stdout is not None
        (size,) = _HEADER.unpack(await self.proc.stdout.readexactly(_HEADER.size))
        if size > _MAX_REPLY_BYTES:
            raise ConnectionError(f"the sandbox sent a reply of {size} bytes")
        try:
            reply = json.loads(await self.proc.stdout.readexactly(size))
        except ValueError:
            raise ConnectionError("the sandbox sent a reply that is not JSON") from None
        if not isinstance(reply, dict):
            raise ConnectionError("the sandbox sent a reply that is not an object")
        return reply

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (its children cannot leave it: setsid and
        setpgid are denied). A bare syscall, so any thread may call it; the event loop reaps."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def wait(self) -> int:
        try:
            return await asyncio.wait_for(self.proc.wait(), 5.0)
        except TimeoutError:
            log.warning("sandbox worker %s did not exit after SIGKILL", self.pid)
            return -signal.SIGKILL
        finally:
            if self.proc.returncode is not None:
                _tracked.discard(self.pid)

    async def end(self, uid: int | None) -> None:
        """Kill the worker and every process it left (by group; by uid too when given)."""
        self.kill()
        await self.wait()
        if not await procs.settle(self.pid, uid, _tracked):
            log.warning("processes of sandbox worker %s survived SIGKILL for 3s", self.pid)


class Sandbox:
    """One episode's private folder, uid and interpreters. Create in the event loop's thread."""

    def __init__(self, settings: SandboxSettings, hash_seed: int | None = None) -> None:
        self.settings = settings
        self.hash_seed = hash_seed
        self.root = os.getuid() == 0
        preflight(settings)  # cached after the first call: cheap here
        self.uid: int | None = _uids.take(settings.uid_base, settings.uid_count) if self.root else None
        Path(settings.root).mkdir(parents=True, exist_ok=True, mode=0o711)
        self.dir = Path(tempfile.mkdtemp(prefix="ep-", dir=settings.root))
        self.work = self.dir / "work"
        self.io = self.dir / "io"
        for folder in (self.work, self.io):
            folder.mkdir(mode=0o700)
            if self.uid is not None:
                os.chown(folder, self.uid, self.uid)
        os.chmod(self.dir, 0o711)
        self._persistent: _Worker | None = None
        self._had_persistent = False
        self.layers: dict[str, Any] = {}
        self.closed = False

    # -- running code --------------------------------------------------------------------------------

    async def run(self, code: str, *, persist: bool, timeout_s: float) -> CellResult:
        """Run one cell; returns its output and exit code. A timeout kills the cell's processes.

        Raises:
            SandboxError: a worker could not be started or confined (no code ran).
        """
        async with _semaphore(self.settings.max_parallel):
            start = time.perf_counter()
            restarted = False
            for name in ("out", "err"):  # whatever the last cell left there (even a symlink) goes
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.io / name)
            if persist:
                worker = self._persistent
                if worker is None or not worker.alive:
                    restarted = self._had_persistent
                    worker = self._persistent = await self._spawn()
                    self._had_persistent = True
            else:
                worker = await self._spawn()
            timed_out = False
            try:
                reply = await asyncio.wait_for(worker.request(code), timeout_s)
                exit_code = reply.get("exit_code")
                if type(exit_code) is not int:
                    raise ConnectionError("the sandbox's reply has no exit code")
            except TimeoutError:
                timed_out = True
                worker.kill()
                exit_code = -signal.SIGKILL
            except (asyncio.IncompleteReadError, ConnectionError):  # the cell ended (or garbled) its interpreter
                worker.kill()
                exit_code = await worker.wait()
            if not (persist and worker.alive and not timed_out):
                # A persistent interpreter's processes all go (by uid: whatever its cells left
                # running); a one-shot's by group, sparing the persistent one.
                await worker.end(self.uid if worker is self._persistent else None)
                if worker is self._persistent:
                    self._persistent = None
            stdout, cut_out = self._read_output("out")
            stderr, cut_err = self._read_output("err")
            return CellResult(
                stdout, stderr, exit_code, timed_out, cut_out or cut_err, time.perf_counter() - start, restarted
            )

    def _read_output(self, name: str, limit: int | None = None) -> tuple[str, bool]:
        """Read a file the sandbox wrote, at most `limit` bytes; returns (text, was cut).

        The sandbox owns its I/O folder and could plant a symlink, a hard link or a FIFO there to
        make the server read (or hang on) something else; only a plain file with one link is read.
        """
        limit = self.settings.max_output_bytes if limit is None else limit
        try:
            fd = os.open(self.io / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return "", False
        except OSError as exc:
            return f"<{name} not readable: {exc.strerror}>", False
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                return f"<{name} was replaced by something that is not a plain file>", False
            data = f.read(limit + 1)
        return data[:limit].decode("utf-8", errors="replace"), len(data) > limit

    async def _spawn(self) -> _Worker:
        s = self.settings
        python, read_paths = sandbox_python(s.python, self.uid is not None)
        processes = s.processes if self.uid is not None else s.processes + procs.tasks_of_uid(os.getuid())
        cfg = {
            "uid": self.uid,
            "gid": self.uid,
            "parent_pid": os.getpid(),
            "home": str(self.work),
            "io_dir": str(self.io),
            "read_paths": list(read_paths),
            "write_paths": [str(self.dir)],
            "rw_files": ["/dev/null"],
            "require_landlock": isolation_report(s)["landlock_required"],
            "limits": {
                "cpu_s": int(s.cpu_budget_s),
                "cell_cpu_s": int(s.timeout_s) + 1,
                "memory_bytes": s.memory_mb << 20,
                "file_bytes": s.file_mb << 20,
                "processes": processes,
                "open_files": s.open_files,
            },
            "environ": self._environ(),
        }
        boot_path = self.io / "boot.log"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(boot_path)
        boot_log = os.open(boot_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            proc = await asyncio.create_subprocess_exec(
                python,
                "-s",
                "-B",
                WORKER,
                marshal.dumps(cfg).hex(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=boot_log,
                cwd=str(self.work),
                env=self._environ(),
                start_new_session=True,
            )
        finally:
            os.close(boot_log)
        worker = _Worker(proc, {})
        try:
            hello = await asyncio.wait_for(worker.read(), _START_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await worker.end(None)
            raise SandboxError(f"the sandbox worker did not start ({type(exc).__name__}): {self._boot_log()}") from None
        if not hello.get("ready"):
            await worker.end(None)
            raise SandboxError(f"the sandbox could not confine itself, so no code was run: {hello.get('error')}")
        worker.layers = self.layers = hello["layers"]
        return worker

    def _environ(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.work),
            "TMPDIR": str(self.work),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = str(self.hash_seed % (2**32))
        return env

    def _boot_log(self) -> str:
        text, _ = self._read_output("boot.log", limit=4000)
        return text[-2000:] or "no output"

    # -- ending ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every process of the sandbox and delete its folder (idempotent; any thread)."""
        if self.closed:
            return
        self.closed = True
        if self._persistent is not None:
            self._persistent.kill()
            self._persistent = None
        if self.uid is not None:
            # Until none is left, so the uid is free for the next sandbox (bounded: a few rounds).
            for _ in range(100):
                procs.reap_orphans(_tracked)
                if not procs.kill_uid(self.uid):
                    break
                time.sleep(0.01)
            _uids.give_back(self.uid)
        shutil.rmtree(self.dir, ignore_errors=True)


def _semaphore(limit: int) -> asyncio.Semaphore:
    # One per event loop (tests run several servers, each with its own loop).
    loop_id = id(asyncio.get_running_loop())
    sem = _parallel.get(loop_id)
    if sem is None:
        sem = _parallel[loop_id] = asyncio.Semaphore(limit)
    return sem
