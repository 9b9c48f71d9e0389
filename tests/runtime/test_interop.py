"""Interop with upstream openenv-core 0.3.0, both ways, with its own venv and its own code."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator

import pytest

from openenv import (
    Action,
    EnvClient,
    EnvExecutionError,
    GenericEnvClient,
    InvalidActionError,
    Observation,
    State,
    create_app,
)
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import ROOT, ProcessServer, serve_app

pytestmark = pytest.mark.interop
UPSTREAM = ROOT / "tests" / "support" / "upstream"


class UpAction(Action):
    message: str = ""
    fail: bool = False


class UpObservation(Observation):
    echoed: str
    count: int


class UpClient(EnvClient[UpAction, UpObservation, State]):
    pass


@pytest.fixture(scope="module")
def upstream_url(upstream_python: str) -> Iterator[str]:
    server = ProcessServer(
        [upstream_python, "-m", "uvicorn", "count_server:app", "--log-level", "warning"], cwd=UPSTREAM
    )
    try:
        yield server.wait()
    finally:
        server.stop()


async def test_our_typed_client_drives_an_upstream_server(upstream_url: str) -> None:
    async with UpClient(upstream_url) as env:
        reset = await env.reset(seed=4)
        assert reset.observation.echoed == "ready" and reset.reward == 0.0 and reset.done is False
        for i in range(1, 201):
            result = await env.step(UpAction(message=f"m{i}"))
            assert result.observation.count == i and result.reward == float(i)
        state = await env.state()
        assert state.step_count == 200 and state.episode_id == "ep-4"
        assert env.server_extensions == frozenset()  # an upstream server announces none
        assert await env.render() is None  # so no render frame is ever sent to it

        with pytest.raises(InvalidActionError) as bad:
            await env.step({"message": 5})
        assert bad.value.errors
        with pytest.raises(EnvExecutionError, match="asked to fail"):
            await env.step(UpAction(message="x", fail=True))
        assert (await env.step(UpAction(message="after"))).observation.count == 201
        # timeout_s is only a client-side bound for servers without the extension
        assert (await env.step(UpAction(message="t"), timeout_s=5)).observation.count == 202


async def test_our_generic_client_drives_an_upstream_server(upstream_url: str) -> None:
    async with GenericEnvClient(upstream_url) as env:
        await env.reset()
        result = await env.step({"message": "plain"})
        assert result.observation == {"echoed": "plain", "count": 1}
        assert (await env.state())["step_count"] == 1


async def test_concurrent_sessions_on_an_upstream_server(upstream_url: str) -> None:
    async def one(i: int) -> tuple[int, str | None]:
        async with UpClient(upstream_url) as env:
            await env.reset(seed=i)
            for _ in range(i + 1):
                result = await env.step(UpAction(message=str(i)))
            return result.observation.count, (await env.state()).episode_id

    results = await asyncio.gather(*(one(i) for i in range(12)))
    assert results == [(i + 1, f"ep-{i}") for i in range(12)]


def test_upstream_clients_drive_our_server(upstream_python: str) -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    with serve_app(app) as url:
        out = subprocess.run(
            [upstream_python, str(UPSTREAM / "driver.py"), url], capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["reset"] == {"echoed": "ready", "reward": 0.0, "done": False}
    assert report["counts_ok"] is True
    assert report["metadata"] == {"reward_components": {"a": 1}}  # upstream clients accept our metadata
    assert report["state"] == {"episode_id": "ep-3", "step_count": 101, "last_message": "with meta"}
    assert "VALIDATION_ERROR" in report["bad"]
    assert "EXECUTION_ERROR" in report["boom"] and "asked to fail" in report["boom"]
    assert report["after_errors"] == 102
    assert report["generic"]["observation"]["echoed"] == "generic" and report["generic"]["reward"] == 1.0
    assert report["concurrent"] == [{"count": i + 1, "episode_id": f"ep-{i}"} for i in range(8)]


async def test_upstream_client_drives_echo_env_served_like_a_space(
    upstream_python: str, echo_process: ProcessServer
) -> None:
    """echo_env offers "fork": while our client snapshots and forks beside it, upstream's client plays
    on and never meets a fork frame or field."""
    from echo_env import EchoAction, EchoEnv

    async with EchoEnv(echo_process.url) as ours:
        assert "fork" in ours.server_extensions
        await ours.reset()
        snap = await ours.snapshot()
        kids = await ours.fork(2)
        out = await asyncio.to_thread(
            subprocess.run,
            [upstream_python, str(UPSTREAM / "driver_fork.py"), echo_process.url],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=UPSTREAM,
        )
        assert (await kids[1].step(EchoAction(message="kid"))).observation.echoed_message == "kid"
        assert await ours.restore(snap) is not None
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["steps"][0] == {"echoed_message": "m0", "message_length": 2}
    assert [s["echoed_message"] for s in report["steps"]] == [f"m{i}" for i in range(5)]
    assert report["state"]["step_count"] == 5
    frames = report["frames"]
    assert [f["type"] for f in frames] == ["observation"] * 6 + ["state"]
    assert frames[1]["data"]["reward"] == pytest.approx(0.2)
    for word in ("snapshot", "fork", "restore", "session_ids", "release"):
        assert word not in json.dumps(frames), f"upstream 0.3.0 met {word!r}"
