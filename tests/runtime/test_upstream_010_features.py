"""What upstream openenv 0.10.0 added to the wire, on our server: the Task API routes,
`/ws?session_id=` attached to an HTTP session, WebSocket `/mcp`, `reset_observation` in /schema,
OPENENV_MODE=production, and the observation's metadata beside it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from openenv import Action, Environment, Observation, ServerSettings, State, create_app
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import ROOT, serve_app

sys.path.insert(0, str(ROOT / "envs"))


class PickAction(Action):
    choice: int


class PickObservation(Observation):
    task: dict[str, Any] | None = None


class PickResetObservation(Observation):
    task: dict[str, Any] | None = None
    briefing: str = ""


class PickEnv(Environment[PickAction, PickObservation, State]):
    """Pick the right number; tasks in two splits."""

    TASKS: ClassVar[dict[str, list[dict[str, Any]]]] = {
        "train": [{"id": f"t{i}", "answer": i} for i in range(5)],
        "eval": [{"id": "e0", "answer": 42}],
    }

    def __init__(self) -> None:
        self._state, self._task = State(episode_id="e", step_count=0), None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> PickObservation:
        self._task = self.TASKS[split][index] if split is not None and index is not None else None
        return PickObservation(task=self._task)

    def step(self, action: PickAction, timeout_s: float | None = None, **kwargs: Any) -> PickObservation:
        self._state.step_count += 1
        right = self._task is not None and action.choice == self._task["answer"]
        return PickObservation(task=self._task, reward=1.0 if right else 0.0, done=right)

    @property
    def state(self) -> State:
        return self._state

    def list_splits(self) -> list[str]:
        return list(self.TASKS)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self.TASKS[split]


@pytest.fixture(scope="module")
def pick_url() -> Iterator[str]:
    with serve_app(
        create_app(
            PickEnv, PickAction, PickObservation, env_name="pick_env", reset_observation_cls=PickResetObservation
        )
    ) as url:
        yield url


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    with serve_app(
        create_app(CountEnv, CountAction, CountObservation, env_name="count_env", max_concurrent_envs=2)
    ) as url:
        yield url


def rpc(url: str, method: str, **params: Any) -> dict[str, Any]:
    return httpx.post(
        f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=10
    ).json()


def ws(url: str, path: str = "/ws") -> ClientConnection:
    return connect(url.replace("http", "ws") + path, open_timeout=5, close_timeout=2)


def ask(conn: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    conn.send(json.dumps(frame))
    return json.loads(conn.recv(timeout=5))


# -- the Task API ---------------------------------------------------------------------------------------


def test_task_routes_answer_as_upstream_does(pick_url: str) -> None:
    assert httpx.get(f"{pick_url}/list_environments").json() == ["pick_env"]
    assert httpx.get(f"{pick_url}/PICK_ENV/splits").json() == [
        {"name": "train", "type": "train"},
        {"name": "eval", "type": "validation"},
    ]
    assert httpx.post(f"{pick_url}/pick_env/tasks", json={"split": "eval"}).json() == {
        "tasks": [{"id": "e0", "answer": 42}],
        "env_name": "pick_env",
    }
    assert httpx.post(f"{pick_url}/pick_env/num_tasks", json={"split": "train"}).json() == {"num_tasks": 5}
    assert httpx.post(f"{pick_url}/pick_env/task", json={"split": "train", "index": 3}).json() == {
        "task": {"id": "t3", "answer": 3}
    }
    assert httpx.post(f"{pick_url}/pick_env/task_range", json={"split": "train", "start": 1, "stop": 3}).json()[
        "tasks"
    ] == [{"id": "t1", "answer": 1}, {"id": "t2", "answer": 2}]
    # what goes wrong says what to do
    out = httpx.post(f"{pick_url}/pick_env/task", json={"split": "train", "index": 9})
    assert out.status_code == 400 and "num_tasks" in out.json()["detail"]
    out = httpx.post(f"{pick_url}/pick_env/tasks", json={"split": "nope"})
    assert out.status_code == 404 and out.json()["detail"] == "unknown split 'nope'; this environment has train, eval"
    assert httpx.get(f"{pick_url}/other_env/splits").status_code == 404
    assert httpx.post(f"{pick_url}/pick_env/tasks", json={"split": "train", "extra": 1}).status_code == 422


def test_an_env_without_tasks_answers_501(count_url: str) -> None:
    out = httpx.get(f"{count_url}/count_env/splits")
    assert out.status_code == 501 and out.json()["detail"].startswith(
        "list_splits is not supported for this environment"
    )
    assert httpx.post(f"{count_url}/count_env/num_tasks", json={"split": "train"}).status_code == 501


def test_the_client_lists_and_plays_tasks(pick_url: str) -> None:
    from openenv import GenericEnvClient

    with GenericEnvClient(pick_url).sync() as env:
        assert [s["name"] for s in env.list_splits()] == ["train", "eval"]
        assert env.get_task("eval", 0) == {"id": "e0", "answer": 42}
        reset = env.reset(split="eval", index=0)
        assert reset.observation["task"]["answer"] == 42
        step = env.step({"choice": 42})
        assert step.reward == 1.0 and step.done
        other = env.new_session()
        assert other.state()["step_count"] == 0 and env.state()["step_count"] == 1


def test_schema_shows_the_reset_observation(pick_url: str, count_url: str) -> None:
    schema = httpx.get(f"{pick_url}/schema").json()
    assert (
        "briefing" in schema["reset_observation"]["properties"]
        and "briefing" not in schema["observation"]["properties"]
    )
    plain = httpx.get(f"{count_url}/schema").json()
    assert plain["reset_observation"] == plain["observation"]


# -- sessions: HTTP-made, WebSocket-driven ----------------------------------------------------------------------


def test_a_websocket_attaches_to_an_http_session(count_url: str) -> None:
    sid = rpc(count_url, "openenv/session/create")["result"]["session_id"]
    with ws(count_url, f"/ws?session_id={sid}") as conn:
        assert ask(conn, {"type": "reset", "data": {"seed": 5}})["data"]["observation"]["echoed"] == "ready"
        ask(conn, {"type": "step", "data": {"message": "a"}})
        # the same env instance: the state the socket changed is what the session shows
        assert ask(conn, {"type": "state"})["data"]["step_count"] == 1
        # a second socket on the same session is refused, and says why
        with ws(count_url, f"/ws?session_id={sid}") as second:
            frame = json.loads(second.recv(timeout=5))
            assert (
                frame["type"] == "error"
                and frame["data"]["code"] == "SESSION_ERROR"
                and "already attached" in frame["data"]["message"]
            )
        # closing it over HTTP while attached waits for the socket to let go
        assert rpc(count_url, "openenv/session/close", session_id=sid)["result"] == {
            "session_id": sid,
            "closed": False,
            "closing": True,
        }
        assert ask(conn, {"type": "step", "data": {"message": "b"}})["data"]["observation"]["count"] == 2
    deadline_checks = [rpc(count_url, "tools/list", session_id=sid) for _ in range(50)]
    assert any("error" in r for r in deadline_checks)  # closed once the socket let go


def test_an_attached_session_outlives_its_socket(count_url: str) -> None:
    sid = rpc(count_url, "openenv/session/create")["result"]["session_id"]
    with ws(count_url, f"/ws?session_id={sid}") as conn:
        ask(conn, {"type": "reset"})
        ask(conn, {"type": "step", "data": {"message": "kept"}})
    with ws(count_url, f"/ws?session_id={sid}") as conn:  # a new socket finds the episode where it was
        assert ask(conn, {"type": "state"})["data"]["step_count"] == 1
    assert rpc(count_url, "openenv/session/close", session_id=sid)["result"]["closed"] is True


def test_unknown_session_ids_and_capacity(count_url: str) -> None:
    with ws(count_url, "/ws?session_id=nope") as conn:
        frame = json.loads(conn.recv(timeout=5))
        assert frame["data"]["code"] == "SESSION_ERROR" and "openenv/session/create" in frame["data"]["message"]
    ids = [rpc(count_url, "openenv/session/create")["result"]["session_id"] for _ in range(2)]  # the capacity is 2
    full = rpc(count_url, "openenv/session/create")
    assert full["error"]["data"] == {"active_sessions": 2, "max_sessions": 2}
    with ws(count_url) as conn:  # sessions of both kinds count against one capacity: told at once, then closed
        assert json.loads(conn.recv(timeout=5))["data"]["code"] == "CAPACITY_REACHED"
    for sid in ids:
        rpc(count_url, "openenv/session/close", session_id=sid)


def test_mcp_over_a_websocket(count_url: str) -> None:
    with ws(count_url, "/mcp") as conn:
        conn.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}))
        reply = json.loads(conn.recv(timeout=5))
        assert reply["id"] == 7 and reply["result"] == {"tools": []}
        conn.send("not json")
        assert json.loads(conn.recv(timeout=5))["error"]["code"] == -32700
        conn.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "openenv/session/create"}))
        assert json.loads(conn.recv(timeout=5))["result"]["session_id"]  # its own session


# -- modes and metadata --------------------------------------------------------------------------------------------------------


def test_production_mode_leaves_out_the_stateless_routes() -> None:
    app = create_app(CountEnv, CountAction, CountObservation, settings=ServerSettings(mode="production"))
    with serve_app(app) as url:
        assert httpx.post(f"{url}/reset", json={}).status_code == 404
        assert httpx.get(f"{url}/state").status_code == 404
        with ws(url) as conn:  # sessions work as ever
            assert ask(conn, {"type": "reset"})["type"] == "observation"
        assert httpx.get(f"{url}/health").json()["status"] == "healthy"
    assert ServerSettings.from_env({"OPENENV_MODE": "Production"}).mode == "production"
    with pytest.raises(Exception, match="simulation"):
        ServerSettings.from_env({"OPENENV_MODE": "staging"})


def test_metadata_is_beside_the_observation_only_when_there_is_some(count_url: str) -> None:
    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        plain = ask(conn, {"type": "step", "data": {"message": "m"}})["data"]
        assert "metadata" not in plain  # upstream's MCP client rejects a null there
        rich = ask(conn, {"type": "step", "data": {"message": "m", "meta": {"k": 1}}})["data"]
        assert rich["metadata"] == {"k": 1} == rich["observation"]["metadata"]
