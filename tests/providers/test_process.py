"""ProcessProvider: an env folder's server in its own cached venv, stopped without a trace."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from echo_env import EchoAction, EchoEnv

from openenv.client.providers import ProcessProvider, lifecycle
from openenv.client.providers._venv import read_env_folder
from openenv.errors import ConfigurationError, EnvDisconnectedError, ProviderStartError
from tests.providers.conftest import ECHO_DIR, RUN_LABEL


def _alive(pid: int) -> bool:
    return lifecycle.process_identity(pid) is not None


async def test_runs_in_its_own_venv_and_stops(tmp_path: Path) -> None:
    provider = ProcessProvider(ECHO_DIR)
    url = await provider.astart()
    try:
        python = provider.proc.args[0]  # type: ignore[union-attr]
        assert "/venvs/echo_env-" in python, python  # the env's venv, not the test interpreter
        async with EchoEnv(url) as env:
            await env.reset()
            result = await env.step(EchoAction(message="hello"))
        assert result.observation.echoed_message == "hello"
        assert "Uvicorn running" in provider.logs() or "Application startup complete" in provider.logs()
        pid = provider.proc.pid  # type: ignore[union-attr]
        # By this worker's label: the run's state folder is shared, other workers list theirs there too.
        assert [i.name for i in lifecycle.list_running(labels=dict([RUN_LABEL]), docker=False)] == [provider.record_id]
    finally:
        await provider.astop()
    assert not _alive(pid)
    assert lifecycle.list_running(labels=dict([RUN_LABEL]), docker=False) == []  # its record is gone too
    await provider.astop()  # idempotent


async def test_venv_is_made_once_per_set_of_dependencies(tmp_path: Path) -> None:
    first = ProcessProvider(ECHO_DIR)
    second = ProcessProvider(ECHO_DIR)
    assert first.interpreter() == second.interpreter()  # cached: same venv, made once
    started = time.monotonic()
    second.interpreter()
    assert time.monotonic() - started < 0.1
    changed = tmp_path / "echo_env"
    import shutil

    shutil.copytree(ECHO_DIR, changed, ignore=shutil.ignore_patterns("__pycache__"))
    (changed / "server" / "requirements.txt").write_text(
        "iniconfig\n"
    )  # in uv's cache: a dependency of our own test tools
    other = ProcessProvider(changed)
    python = other.interpreter()
    assert python != first.interpreter()
    proc = await asyncio.create_subprocess_exec(python, "-c", "import iniconfig", stderr=asyncio.subprocess.PIPE)
    assert await proc.wait() == 0  # the env's own requirement is installed in its venv


async def test_server_that_cannot_start_gives_its_output(tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "broken_env"
    shutil.copytree(ECHO_DIR, broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "server" / "app.py").write_text("raise RuntimeError('the env cannot load its data file')\n")
    provider = ProcessProvider(broken, venv=False, startup_timeout_s=30)
    started = time.monotonic()
    with pytest.raises(ProviderStartError) as info:
        await provider.astart()
    assert time.monotonic() - started < 15  # it exited: no waiting for the timeout
    assert "exited with code" in str(info.value)
    assert "the env cannot load its data file" in str(info.value)
    assert "the env cannot load its data file" in info.value.logs
    # nothing this process started is left (the run's other workers' servers are listed too: theirs)
    assert lifecycle.list_running(labels={lifecycle.LABEL_OWNER: lifecycle.this_owner()}, docker=False) == []


def test_not_an_env_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is not a folder"):
        ProcessProvider(tmp_path / "missing")
    with pytest.raises(ConfigurationError, match=r"has no server/app\.py"):
        ProcessProvider(tmp_path)


def test_reads_the_manifest() -> None:
    folder = read_env_folder(ECHO_DIR)
    assert (folder.name, folder.app, folder.port, folder.upstream) == ("echo_env", "server.app:app", 8000, False)


async def test_from_process_client_owns_the_server() -> None:
    env = await EchoEnv.from_process(ECHO_DIR, message_timeout_s=10)
    provider = env.provider
    assert isinstance(provider, ProcessProvider)
    pid = provider.proc.pid  # type: ignore[union-attr]
    assert (await env.reset()).observation.echoed_message == "Echo environment ready!"
    await env.close()
    assert not _alive(pid)


def test_from_process_sync() -> None:
    with EchoEnv.from_process(ECHO_DIR).sync() as env:
        pid = env.provider.proc.pid
        assert env.step(EchoAction(message="abc")).reward == pytest.approx(0.3)
    assert not _alive(pid)


async def test_server_dying_mid_episode_is_a_clear_error_not_a_hang(crashy_env: Path) -> None:
    env = await EchoEnv.from_process(crashy_env, venv=False, message_timeout_s=60)
    try:
        await env.reset()
        await env.step(EchoAction(message="fine"))
        started = time.monotonic()
        with pytest.raises(EnvDisconnectedError, match=r"connection to the server was lost|closed the session"):
            await env.step(EchoAction(message="die"))
        assert time.monotonic() - started < 5  # not the 60 s message timeout
        await asyncio.sleep(0.1)
        assert env.provider.exit_reason() == "the server process exited with code 3"
    finally:
        await env.close()


async def test_killed_server_mid_episode() -> None:
    env = await EchoEnv.from_process(ECHO_DIR, venv=False, message_timeout_s=60)
    try:
        await env.reset()
        os.killpg(env.provider.proc.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(EnvDisconnectedError):
            await env.step(EchoAction(message="anyone?"))
        assert time.monotonic() - started < 5
    finally:
        await env.close()
