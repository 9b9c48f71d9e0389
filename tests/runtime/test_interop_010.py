"""Interop with upstream openenv 0.10.0 (its own venv, its own code), both ways: its MCP tool client
(an HTTP session with its WebSocket attached) and generic client drive our echo_env, with one
session allowed and with several; our clients drive its server, the Task API included."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from openenv import GenericEnvClient, NoTasksError
from tests.support.servers import ROOT, ProcessServer, serve_process

pytestmark = pytest.mark.interop
UPSTREAM = ROOT / "tests" / "support" / "upstream"


def _echo_server(max_sessions: int) -> contextlib.AbstractContextManager[ProcessServer]:
    env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OPENENV_MAX_SESSIONS": str(max_sessions),
    }
    return serve_process(
        [sys.executable, "-m", "openenv.server", "server.app:app"], cwd=ROOT / "envs" / "echo_env", env=env
    )


def _drive(python: str, url: str, capacity: str) -> dict:
    out = subprocess.run(
        [python, str(UPSTREAM / "driver_010.py"), url, capacity], capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    return {**json.loads(lines[-2]), **json.loads(lines[-1])}


@pytest.mark.parametrize("capacity", ["one", "many"])
def test_upstream_010_clients_drive_our_echo_env(upstream010_python: str, capacity: str) -> None:
    with _echo_server(1 if capacity == "one" else 8) as server:
        report = _drive(upstream010_python, server.url, capacity)
    # The MCP tool client's reset, tool calls and state all reached one session (its HTTP session, attached).
    assert report["reset"]["echoed_message"] == "Echo environment ready!"
    assert report["tools"] == ["echo_message", "echo_with_length"]
    assert report["call"] == "through the attached session"
    assert report["call_dict"] == {"message": "four", "length": 4}
    assert "no_such_tool" in report["bad_tool"]
    assert report["state"]["step_count"] == 0 and report["state"]["episode_id"]
    if capacity == "one":
        assert "CAPACITY_REACHED" in report["second"], report["second"]
    else:
        assert report["child_reset"]["echoed_message"] == "Echo environment ready!"
    generic = report["generic"]
    assert generic["observation"] == {"echoed_message": "hello", "message_length": 5} and generic[
        "reward"
    ] == pytest.approx(0.5)
    assert report["generic_state"]["step_count"] == 1
    # echo_env offers "fork"; upstream's client never meets a frame or field of it.
    assert [f["type"] for f in report["generic_frames"]] == ["observation", "observation", "state"]
    assert not any(word in json.dumps(report["generic_frames"]) for word in ("snapshot", "fork", "session_ids"))
    assert report["typed"] == {"echoed": "typed", "reward": pytest.approx(0.5)}  # its typed client, async...
    assert report["sync"] == {"echoed": "sync", "steps": 1}  # ...and blocking


@pytest.fixture(scope="module")
def upstream010_url(upstream010_python: str) -> Iterator[str]:
    with serve_process(
        [upstream010_python, "-m", "uvicorn", "tasks_server_010:app", "--log-level", "warning"], cwd=UPSTREAM
    ) as server:
        yield server.url


async def test_our_client_drives_an_upstream_010_server_and_its_tasks(upstream010_url: str) -> None:
    async with GenericEnvClient(upstream010_url) as env:
        assert await env.list_splits() == [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]
        assert await env.num_tasks("train") == 6
        assert await env.get_task("train", 2) == {"id": "train-2", "target": 6}
        assert [t["id"] for t in await env.get_task_range("train", 1, 3)] == ["train-1", "train-2"]
        assert len(await env.list_tasks("test")) == 1
        reset = await env.reset(split="train", index=2)
        assert reset.observation["target_known"] is True
        step = await env.step({"guess": 6})
        assert step.reward == 1.0 and step.done is True
        assert step.metadata == {"guesses": 1}  # 0.10.0 sends it beside the observation
        child = await env.new_session()
        assert (await child.state())["step_count"] == 0 and (await env.state())["step_count"] == 1
    assert child._conn is None  # closed with its parent


def test_our_typed_blocking_client_drives_an_upstream_010_server(upstream010_url: str) -> None:
    from openenv import Action, EnvClient, Observation, State

    class GuessAction(Action):
        guess: int

    class GuessObservation(Observation):
        target_known: bool = False
        feedback: str = ""

    class GuessClient(EnvClient[GuessAction, GuessObservation, State]):
        pass

    with GuessClient(upstream010_url).sync() as env:
        env.reset()
        low = env.step(GuessAction(guess=1))
        assert low.observation.feedback == "higher" and low.reward == 0.0 and low.metadata == {"guesses": 1}
        assert env.step(GuessAction(guess=7)).done
        assert env.state().step_count == 2


async def test_our_client_on_a_server_without_tasks_says_so(echo_url: str) -> None:
    async with GenericEnvClient(echo_url) as env:
        with pytest.raises(NoTasksError, match="list_splits is not supported"):
            await env.list_splits()
