"""Snapshots and forks (the "fork" protocol extension): the env helper, the frames, the client
(async and blocking), the bounds, and every refusal leaving the session usable."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from openenv import CapacityReachedError, Environment, SnapshotError, create_app
from openenv.errors import SnapshotUnsupportedError
from openenv.server.settings import ServerSettings
from openenv.server.snapshots import SnapshotStore
from tests.runtime.envs import CountAction, CountClient, CountEnv, CountObservation
from tests.support.servers import serve_app


class ForkCountEnv(CountEnv):
    """CountEnv whose state (a plain model) can be snapshotted."""

    SNAPSHOT_ATTRS = ("_state", "seed")


def _app(**settings: Any) -> Any:
    base = {"snapshots_per_session": 4, "snapshots_total": 6, "fork_max_children": 8, **settings}
    return create_app(
        ForkCountEnv, CountAction, CountObservation, max_concurrent_envs=6, settings=ServerSettings(**base)
    )


@pytest.fixture(scope="module")
def fork_app() -> Any:
    return _app()


@pytest.fixture(scope="module")
def fork_url(fork_app: Any) -> Iterator[str]:
    with serve_app(fork_app) as url:
        yield url


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    with serve_app(create_app(CountEnv, CountAction, CountObservation)) as url:
        yield url


def _store(app: Any) -> SnapshotStore:
    return app.openenv_ws.runtime.forks.store  # type: ignore[no-any-return]


def ws(url: str, query: str = "") -> ClientConnection:
    return connect(url.replace("http", "ws") + "/ws" + query, open_timeout=5, close_timeout=2)


def ask(conn: ClientConnection, frame: object) -> dict[str, Any]:
    conn.send(json.dumps(frame))
    return json.loads(conn.recv(timeout=5))  # type: ignore[no-any-return]


def step(conn: ClientConnection, message: str) -> dict[str, Any]:
    return ask(conn, {"type": "step", "data": {"message": message}})


def _wait_active(url: str, n: int) -> None:
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/health").json()["active_sessions"] != n:
        assert time.monotonic() < deadline, f"active sessions never became {n}"
        time.sleep(0.01)


# -- the env side --------------------------------------------------------------------------------


class _Upstreamish(Environment[Any, Any, Any]):
    """State kept under upstream's names get_state / set_state."""

    def __init__(self) -> None:
        self.rng = random.Random(1)

    def get_state(self) -> Any:
        return self.rng.getstate()

    def set_state(self, state: Any) -> None:
        self.rng.setstate(state)


def test_plain_data_envs_and_upstream_names_snapshot_and_restore() -> None:
    env = ForkCountEnv()
    env.reset(seed=3)
    env.step(CountAction(message="a"))
    snap = env.snapshot()
    env.step(CountAction(message="b"))
    env.restore(snap)
    env.restore(snap)  # a snapshot may be restored again: restore keeps no reference into it
    env.step(CountAction(message="c"))
    assert env.state.step_count == 2 and env.state.last_message == "c"
    assert snap["_state"].step_count == 1

    up = _Upstreamish()
    assert _Upstreamish.supports_snapshots()
    saved = up.snapshot()
    first = up.rng.random()
    up.restore(saved)
    assert up.rng.random() == first

    assert not CountEnv.supports_snapshots()
    with pytest.raises(SnapshotUnsupportedError, match="cannot be snapshotted"):
        CountEnv().snapshot()


# -- the wire ------------------------------------------------------------------------------------


def test_only_forkable_envs_announce_fork_and_the_others_say_why(fork_url: str, count_url: str) -> None:
    protocol = httpx.get(f"{fork_url}/metadata").json()["protocol"]
    assert protocol["extensions"] == ["step-timeout", "render", "fork"]
    assert protocol["fork"]["snapshots_per_session"] == 4 and protocol["fork"]["max_children"] == 8
    plain = httpx.get(f"{count_url}/metadata").json()["protocol"]
    assert "fork" not in plain["extensions"] and "CountEnv cannot be snapshotted" in plain["fork_unsupported"]
    with ws(count_url) as conn:
        assert "fork" not in conn.response.headers["x-openenv-protocol"]
        ask(conn, {"type": "reset"})
        refused = ask(conn, {"type": "snapshot"})
        assert refused["data"]["code"] == "FORK_UNSUPPORTED" and "cannot be snapshotted" in refused["data"]["message"]
        assert step(conn, "still")["data"]["observation"]["count"] == 1


async def test_snapshot_restore_and_fork_through_the_client(fork_url: str, fork_app: Any) -> None:
    async with CountClient(fork_url) as env:
        await env.reset(seed=5)
        await env.step(CountAction(message="one"))
        snap = await env.snapshot()
        assert snap.step_count == 1 and snap.nbytes > 0 and snap.expires_in_s == 600
        await env.step(CountAction(message="two"))
        back = await env.restore(snap)
        assert back is not None and back.observation.count == 1 and back.observation.echoed == "one"
        assert (await env.state()).step_count == 1
        assert (await env.step(CountAction(message="again"))).observation.count == 2

        children = await env.fork(3)
        assert len(children) == 3 and all("fork" in c.server_extensions for c in children)
        counts = [(await c.step(CountAction(message=f"c{i}"))).observation.count for i, c in enumerate(children)]
        assert counts == [3, 3, 3]  # each child went on from the parent's state, on its own
        assert (await children[0].step(CountAction(message="x"))).observation.count == 4
        assert (await env.state()).step_count == 2  # the parent did not move
        from_snap = await env.fork(1, snapshot=snap)
        assert (await from_snap[0].state()).step_count == 1
        assert httpx.get(f"{fork_url}/health").json()["active_sessions"] == 5

        same = await env.get_state()  # upstream's names
        await env.step(CountAction(message="y"))
        assert (await env.set_state(same)) is not None and (await env.state()).step_count == 2
        await env.release(same)
        with pytest.raises(SnapshotError) as gone:
            await env.restore(same)
        assert gone.value.code == "SNAPSHOT_NOT_FOUND"
        assert len(_store(fork_app)) == 1
    _wait_active(fork_url, 0)  # the children closed with their parent...
    assert len(_store(fork_app)) == 0  # ...and its snapshots went with it


def test_the_blocking_client_forks_too(fork_url: str) -> None:
    with CountClient(fork_url).sync() as env:
        env.reset()
        env.step(CountAction(message="a"))
        snap = env.snapshot()
        kids = env.fork(2)
        assert [k.step(CountAction(message="k")).observation.count for k in kids] == [2, 2]
        env.step(CountAction(message="b"))
        assert env.restore(snap).observation.count == 1  # type: ignore[union-attr]
    _wait_active(fork_url, 0)


def test_bad_ids_are_refused_clearly_and_the_session_goes_on(fork_url: str) -> None:
    with ws(fork_url) as a, ws(fork_url) as b:
        ask(a, {"type": "reset"})
        ask(b, {"type": "reset"})
        step(a, "a1")
        theirs = ask(b, {"type": "snapshot"})["data"]["snapshot_id"]
        cases = [
            ({"type": "restore", "data": {"snapshot_id": "nope"}}, "SNAPSHOT_NOT_FOUND", "never taken"),
            ({"type": "restore", "data": {"snapshot_id": theirs}}, "SNAPSHOT_NOT_FOUND", "not this session's"),
            ({"type": "restore", "data": {"snapshot_id": 5}}, "SNAPSHOT_NOT_FOUND", "snapshot_id"),
            ({"type": "restore", "data": "x" * 10}, "VALIDATION_ERROR", "name the snapshot"),
            ({"type": "release", "data": {"snapshot_id": theirs}}, "SNAPSHOT_NOT_FOUND", "not this session's"),
            ({"type": "fork", "data": {"n": 0}}, "VALIDATION_ERROR", "from 1 to 8"),
            ({"type": "fork", "data": {"n": 9}}, "VALIDATION_ERROR", "fork_max_children"),
            ({"type": "fork", "data": {"n": 1, "snapshot_id": theirs}}, "SNAPSHOT_NOT_FOUND", "not this session's"),
        ]
        for frame, code, says in cases:
            reply = ask(a, frame)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (frame, reply)
            assert says in reply["data"]["message"], reply
        assert step(a, "a2")["data"]["observation"]["count"] == 2  # usable after all of that
        assert ask(b, {"type": "restore", "data": {"snapshot_id": theirs}})["type"] == "observation"  # still b's


def test_unused_snapshots_expire_and_say_so() -> None:
    app = _app(snapshot_ttl_s=30)
    now = [1000.0]
    _store(app).clock = lambda: now[0]
    with serve_app(app) as url, ws(url) as conn:
        ask(conn, {"type": "reset"})
        old = ask(conn, {"type": "snapshot"})["data"]["snapshot_id"]
        now[0] += 20
        kept = ask(conn, {"type": "snapshot"})["data"]["snapshot_id"]
        assert ask(conn, {"type": "restore", "data": {"snapshot_id": old}})["type"] == "observation"
        for _ in range(2):
            now[0] += 18  # old is used every 18 s: it stays
            assert ask(conn, {"type": "restore", "data": {"snapshot_id": old}})["type"] == "observation"
        reply = ask(conn, {"type": "restore", "data": {"snapshot_id": kept}})  # unused for 36 s
        assert reply["data"]["code"] == "SNAPSHOT_EXPIRED" and "take a new one" in reply["data"]["message"]
        assert len(_store(app)) == 1
        assert step(conn, "on")["data"]["observation"]["count"] == 1


def test_a_snapshot_storm_is_bounded_per_session_and_per_server() -> None:
    app = _app(snapshot_bytes_per_session=64 << 10)
    store = _store(app)
    with serve_app(app) as url, ws(url) as a, ws(url) as b:
        ask(a, {"type": "reset"})
        ask(b, {"type": "reset"})
        replies = [ask(a, {"type": "snapshot"}) for _ in range(50)]
        kinds = [r["type"] for r in replies]
        assert kinds == ["snapshot"] * 4 + ["error"] * 46
        refusal = replies[-1]["data"]
        assert refusal["code"] == "SNAPSHOT_LIMIT" and refusal["max_snapshots"] == 4 and "release" in refusal["message"]
        assert len(store) == 4
        more = [ask(b, {"type": "snapshot"})["type"] for _ in range(4)]
        assert more == ["snapshot", "snapshot", "error", "error"]  # the server holds 6 at most
        assert len(store) == 6 and store.nbytes <= 6 * (64 << 10)
        first = replies[0]["data"]["snapshot_id"]
        assert ask(a, {"type": "release", "data": {"snapshot_id": first}})["data"]["released"] is True
        assert ask(a, {"type": "snapshot"})["type"] == "snapshot"  # room again
        assert step(a, "fine")["data"]["observation"]["count"] == 1
    big = SnapshotStore(ServerSettings(snapshot_bytes_per_session=2048))
    with pytest.raises(Exception, match="past 2048 bytes"):
        big.add("s", "x" * 4096, None, 0)
    assert len(big) == 0 and big.nbytes == 0


def test_forks_past_capacity_make_nothing_and_unclaimed_children_go_with_the_parent(fork_url: str) -> None:
    with ws(fork_url) as parent:
        ask(parent, {"type": "reset"})
        step(parent, "p")
        made = ask(parent, {"type": "fork", "data": {"n": 3}})["data"]
        assert len(made["session_ids"]) == 3 and made["observation"]["observation"]["count"] == 1
        assert httpx.get(f"{fork_url}/health").json()["active_sessions"] == 4
        refused = ask(parent, {"type": "fork", "data": {"n": 3}})["data"]
        assert refused["code"] == "CAPACITY_REACHED" and refused["requested"] == 3 and refused["max_sessions"] == 6
        assert httpx.get(f"{fork_url}/health").json()["active_sessions"] == 4  # all or nothing
        with ws(fork_url, f"?session_id={made['session_ids'][0]}") as child:
            assert step(child, "c")["data"]["observation"]["count"] == 2
        _wait_active(fork_url, 3)  # a claimed child closes with its socket
        with ws(fork_url, f"?session_id={made['session_ids'][0]}") as late:
            assert json.loads(late.recv(timeout=5))["data"]["code"] == "SESSION_ERROR"
        assert step(parent, "p2")["data"]["observation"]["count"] == 2
    _wait_active(fork_url, 0)  # the unclaimed two closed with the parent


async def test_a_fork_past_capacity_through_the_client_says_so(fork_url: str) -> None:
    async with CountClient(fork_url) as env:
        await env.reset()
        with pytest.raises(CapacityReachedError, match="a fork asked for 6 more"):
            await env.fork(6)
        assert len(await env.fork(5)) == 5


def test_restore_after_a_timed_out_step_waits_for_it_and_pipelined_frames_keep_order() -> None:
    with serve_app(_app()) as url, ws(url) as conn:
        ask(conn, {"type": "reset"})
        snap = ask(conn, {"type": "snapshot"})["data"]["snapshot_id"]
        # Pipelined: step, restore, step; each reply in order, the restore between the two steps.
        for frame in (
            {"type": "step", "data": {"message": "1"}},
            {"type": "restore", "data": {"snapshot_id": snap}},
            {"type": "step", "data": {"message": "2"}},
        ):
            conn.send(json.dumps(frame))
        replies = [json.loads(conn.recv(timeout=5)) for _ in range(3)]
        assert [r["data"]["observation"]["count"] for r in replies] == [1, 0, 1]
        # A step that ran past its timeout still runs in a worker: a restore now would race it.
        slow = ask(conn, {"type": "step", "data": {"message": "slow", "sleep_s": 0.9}, "timeout_s": 0.05})
        assert slow["data"]["code"] == "TIMEOUT"
        busy = ask(conn, {"type": "restore", "data": {"snapshot_id": snap}})
        assert busy["data"]["code"] == "SESSION_BUSY" and "retry" in busy["data"]["message"]
        assert ask(conn, {"type": "fork", "data": {"n": 1}})["data"]["code"] == "SESSION_BUSY"
        deadline = time.monotonic() + 10
        while (reply := ask(conn, {"type": "restore", "data": {"snapshot_id": snap}}))["type"] == "error":
            assert reply["data"]["code"] == "SESSION_BUSY" and time.monotonic() < deadline
            time.sleep(0.05)
        assert reply["data"]["observation"]["count"] == 0
        assert step(conn, "after")["data"]["observation"]["count"] == 1


async def test_the_client_never_sends_fork_frames_to_a_server_without_it(count_url: str) -> None:
    async with CountClient(count_url) as env:
        await env.reset()
        with pytest.raises(SnapshotError) as refused:
            await env.snapshot()
        assert refused.value.code == "FORK_UNSUPPORTED" and "does not announce" in str(refused.value)
        with pytest.raises(SnapshotError):
            await env.fork(2)
        assert (await env.step(CountAction(message="a"))).observation.count == 1


def test_concurrent_forks_from_many_sessions_stay_within_capacity(fork_url: str) -> None:
    async def main() -> list[str]:
        clients = [CountClient(fork_url) for _ in range(3)]
        for c in clients:
            await c.reset()

        async def one(env: CountClient) -> str:
            try:
                return f"forked {len(await env.fork(2))}"
            except CapacityReachedError:
                return "refused"

        try:  # 3 sessions + 2 + 2 > 6: exactly one fork fits, the others make nothing
            return sorted(await asyncio.gather(*(one(c) for c in clients)))
        finally:
            for c in clients:
                await c.close()

    assert asyncio.run(main()) == ["forked 2", "refused", "refused"]
    _wait_active(fork_url, 0)
