"""coding_env: hostile programs try to get out of the sandbox; each is contained, and the server
keeps serving other sessions meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from coding_env import CodeAction, CodingEnv
from coding_env.server import procs
from coding_env.server import settings as sandbox_settings

from tests.envs.coding_env.conftest import TIMEOUT_S
from tests.envs.soak import health
from tests.support.servers import ROOT

SECRET = "s3cret-token-that-must-not-leak"


async def run(env: CodingEnv, code: str, persist: bool = False):
    return (await env.step(CodeAction(code=code, persist=persist))).observation


async def still_serving(url: str) -> None:
    """The server answers at once, and another session gets correct answers."""
    start = time.monotonic()
    assert (await asyncio.to_thread(health, url))["status"] == "healthy"
    assert time.monotonic() - start < 1
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, "print(2 + 2)")
        assert obs.stdout == "4\n" and time.monotonic() - start < TIMEOUT_S + 2


async def sandbox_uid(env: CodingEnv) -> int:
    return int((await run(env, "import os; print(os.getuid())")).stdout)


def processes_of(uid: int) -> list[int]:
    return [pid for pid, *_ in procs._stats() if procs._uid_of(pid) == uid]


@pytest.fixture()
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TEST_SECRET", SECRET)  # the server process holds a secret


async def test_code_does_not_run_as_root_nor_see_the_server_environment(url: str, secret_env: None) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        who = await run(env, "import os; print(os.getuid(), os.getgid(), os.getgroups(), sorted(os.environ))")
        uid, gid, *_ = who.stdout.split()
        assert int(uid) != 0 and int(gid) != 0 and "[]" in who.stdout
        assert "OPENENV_TEST_SECRET" not in who.stdout
        for path in (
            f"/proc/{os.getpid()}/environ",
            "/proc/self/environ",
            "/proc/1/environ",
            f"/proc/{os.getpid()}/cmdline",
        ):
            obs = await run(env, f"print(open({path!r}, 'rb').read())")
            assert obs.exit_code == 1 and "PermissionError" in obs.stderr and SECRET not in obs.stdout, path
        mem = await run(env, f"f = open('/proc/{os.getpid()}/mem', 'rb'); print(f.read(16))")
        assert mem.exit_code == 1 and "PermissionError" in mem.stderr


@pytest.mark.parametrize(
    "path",
    [
        "/etc/shadow",
        "/etc/passwd",
        "/root/.bashrc",
        str(ROOT / "envs" / "coding_env" / "server" / "app.py"),
        str(ROOT / "pyproject.toml"),
    ],
)
async def test_host_files_cannot_be_read(url: str, path: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, f"print(open({path!r}).read()[:100])")
        assert obs.exit_code == 1 and ("PermissionError" in obs.stderr or "FileNotFoundError" in obs.stderr), obs
        listing = await run(env, "import os; print(os.listdir('/etc'))")
        assert listing.exit_code == 1 and "PermissionError" in listing.stderr


async def test_a_world_readable_secret_file_stays_unreadable(url: str, tmp_path: Path) -> None:
    secret = tmp_path / "token.txt"
    secret.write_text(SECRET)
    secret.chmod(0o644)
    tmp_path.chmod(0o755)
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, f"print(open({str(secret)!r}).read())")
        assert SECRET not in obs.stdout and "PermissionError" in obs.stderr


@pytest.mark.parametrize(
    "target",
    ["/tmp/escaped.txt", "/var/tmp/escaped.txt", "/dev/shm/escaped.txt", "../escaped.txt", "../io/../../x.txt"],
)
async def test_nothing_is_written_outside_the_private_folder(url: str, target: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, f"open({target!r}, 'w').write('x')")
        assert obs.exit_code == 1 and "PermissionError" in obs.stderr, obs
        assert not Path(target).exists() or not target.startswith("/")


async def test_file_size_is_limited(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, "f = open('big.bin', 'wb')\nfor _ in range(64):\n    f.write(b'x' * (1 << 20))")
        assert obs.exit_code == 1 and "File too large" in obs.stderr


async def test_the_output_files_cannot_be_swapped_for_host_files(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, "import os\nos.remove('../io/out')\nos.symlink('/etc/shadow', '../io/out')")
        assert "root:" not in obs.stdout and "not readable" in obs.stdout
        hard = await run(env, "import os\nos.remove('../io/out')\nos.link('/etc/passwd', '../io/out')")
        assert "root:" not in hard.stdout and hard.exit_code == 1
        fifo = await run(env, "import os\nos.remove('../io/err')\nos.mkfifo('../io/err')")
        assert "not a plain file" in fifo.stderr  # and the server did not hang opening it
        await still_serving(url)


@pytest.mark.parametrize(
    "code",
    [
        "import socket; s = socket.socket(); s.connect(('127.0.0.1', {port}))",
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port}))",
        "import socket; s = socket.socket(socket.AF_INET6); s.connect(('::1', {port}))",
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('/var/run/docker.sock')",
        "import socket; s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=2)",
    ],
)
async def test_no_network_not_even_loopback(url: str, code: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    async with CodingEnv(url) as env:
        await env.reset()
        obs = await run(env, code.format(port=port))
        assert obs.exit_code == 1 and ("Operation not permitted" in obs.stderr or "PermissionError" in obs.stderr), obs
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the server itself is reachable from here: the sandbox is what stops it


async def test_the_server_cannot_be_signalled_or_traced(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        kill = await run(env, f"import os, signal; os.kill({os.getpid()}, signal.SIGKILL)")
        assert kill.exit_code == 1 and "PermissionError" in kill.stderr
        parent = await run(env, "import os, signal; os.kill(os.getppid(), signal.SIGTERM)")
        assert parent.exit_code == 1 and "PermissionError" in parent.stderr
        trace = await run(
            env,
            f"import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(libc.ptrace(16, {os.getpid()}, 0, 0), ctypes.get_errno())",
        )
        assert trace.stdout.split() == ["-1", "1"]  # PTRACE_ATTACH: EPERM
        escape = await run(env, "import os; os.setsid()")
        assert escape.exit_code == 1 and "PermissionError" in escape.stderr
        ns = await run(
            env,
            "import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(libc.unshare(0x10000000 | 0x40000000), ctypes.get_errno())",
        )
        assert ns.stdout.split() == ["-1", "1"]  # no new user or network namespace
    await still_serving(url)


async def test_an_infinite_loop_is_killed_and_others_are_served_meanwhile(url: str) -> None:
    async with CodingEnv(url) as hog, CodingEnv(url) as other:
        await hog.reset()
        await other.reset()
        loop = asyncio.create_task(run(hog, "while True:\n    pass"))
        await asyncio.sleep(0.3)
        for i in range(3):  # the event loop is not blocked by the runaway cell: each answer comes while it runs
            assert (await run(other, f"print({i})")).stdout == f"{i}\n"
            assert not loop.done()
        obs = await loop
        assert obs.timed_out and obs.exit_code == -signal.SIGKILL and TIMEOUT_S <= obs.duration_s < TIMEOUT_S + 2
        assert (await run(hog, "print('next step is fine')")).stdout == "next step is fine\n"


async def test_a_fork_bomb_is_contained_and_cleaned_up(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        uid = await sandbox_uid(env)
        bomb = asyncio.create_task(
            run(env, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
        )
        await asyncio.sleep(0.5)
        await still_serving(url)
        obs = await bomb
        assert obs.timed_out
        assert len(processes_of(uid)) == 0  # every forked copy is gone
        assert (await run(env, "import subprocess; print(subprocess.run(['true']).returncode)")).stdout == "0\n"


async def test_a_background_process_does_not_outlive_its_step(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        uid = await sandbox_uid(env)
        await run(env, "import subprocess; subprocess.Popen(['sleep', '60'])")
        assert processes_of(uid) == []
        await run(env, "import subprocess; subprocess.Popen(['sleep', '60'])", persist=True)
        assert len(processes_of(uid)) == 2  # the persistent interpreter and its child, until the episode ends
    for _ in range(200):  # killed at once; gone once init has reaped them (this machine's polls)
        if not processes_of(uid):
            break
        await asyncio.sleep(0.05)
    assert processes_of(uid) == []


@pytest.fixture()
def roomy_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sessions opened meanwhile get 60 s, not TIMEOUT_S: a loop that fills the memory limit
    takes a fraction of a second on a quiet machine and several on a busy one, and it must end
    at the memory limit, not at the time limit."""
    monkeypatch.setenv("CODING_ENV_TIMEOUT_S", "60")
    sandbox_settings.get_settings.cache_clear()
    yield
    monkeypatch.undo()
    sandbox_settings.get_settings.cache_clear()


async def test_memory_is_limited(url: str, roomy_time: None) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        big = await run(env, "a = bytearray(2 * 1024 ** 3)")
        assert big.exit_code == 1 and "MemoryError" in big.stderr
        grow = await run(env, "chunks = []\nwhile True:\n    chunks.append(b'x' * (1 << 20))")
        assert grow.exit_code == 1 and "MemoryError" in grow.stderr and not grow.timed_out
        assert (await run(env, "print('ok')")).stdout == "ok\n"
    await still_serving(url)


async def test_many_sandboxes_use_distinct_uids(url: str) -> None:
    async def uid() -> int:
        async with CodingEnv(url) as env:
            await env.reset()
            return await sandbox_uid(env)

    uids = await asyncio.gather(*(uid() for _ in range(4)))
    assert len(set(uids)) == 4 or os.getuid() != 0


async def test_forged_replies_on_the_control_pipe_only_end_the_cell(url: str) -> None:
    forge = (
        "import os, struct\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, struct.pack('>I', 9) + b'not json!')\n"
        "    except OSError:\n"
        "        pass\n"
        "import time; time.sleep(1)"
    )
    async with CodingEnv(url) as env:
        await env.reset()
        await run(env, "x = 1", persist=True)
        obs = await run(env, forge, persist=True)
        assert obs.exit_code == -signal.SIGKILL and not obs.timed_out and obs.duration_s < 1
        after = await run(env, "print(globals().get('x'))", persist=True)
        assert after.interpreter_restarted and after.stdout == "None\n"
    await still_serving(url)
