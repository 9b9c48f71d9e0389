"""Issue 37: the periodic duties run in one process of all those serving a database. Three real
`openenv hub serve` processes share one database; exactly one of them crawls; the leader is killed
outright (kill -9) in the middle of a crawl (on PostgreSQL the crawl is held on a table lock, so
the kill lands inside it), and another process takes over within one lease, never while the dead
leader's lease still ran; then that one is killed too, and the third takes over."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.support.procs import running
from tests.support.servers import ROOT, ProcessServer

pytestmark = pytest.mark.slow

LEASE_S = 2.0
EVERY_S = 0.5
# A candidate finds the lease free at most a renewal period (lease/3) after it ran out, then its
# crawl starts within a tick (lease/4, at most 1 s) and a database round trip.
TAKEOVER_S = LEASE_S + LEASE_S / 3 + min(1.0, LEASE_S / 4) + 1.0
T = TypeVar("T")


def _wait(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture()
def hubs(tmp_path: Path, db_url: str, clean_factory: Any) -> Iterator[list[ProcessServer]]:
    (tmp_path / "envs").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENENV_HUB_")}
    env.update(
        {
            "OPENENV_HUB_WEBSITE": "false",
            "OPENENV_HUB_BUILDER": "process",
            "OPENENV_HUB_LOCAL_SOURCE": str(tmp_path / "envs"),
            "OPENENV_HUB_LEADER_LEASE_S": str(LEASE_S),
            "OPENENV_HUB_COLLECT_EVERY_S": "0",
        }
    )
    openenv = str(Path(sys.executable).parent / "openenv")
    cmd = [openenv, "hub", "serve", "--workers", "0", "--reindex-every", str(EVERY_S), "--database-url", db_url]
    servers = [ProcessServer([*cmd, "--data-dir", str(tmp_path / f"data-{i}")], cwd=ROOT, env=env) for i in range(3)]
    with ExitStack() as stack:
        for server in servers:
            stack.callback(server.stop)
        for server in servers:
            server.wait("/api/v1/health", timeout=90)
        yield servers


def _now(engine: Engine) -> float:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            return float(conn.execute(text("SELECT extract(epoch from statement_timestamp())")).scalar_one())
    return time.time()


def _runs(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT holder, term, started_at, finished_at FROM duty_runs "
                    "WHERE duty = 'reconcile' ORDER BY started_at, id"
                )
            )
        )


def _lease(engine: Engine) -> Any:
    with engine.connect() as conn:
        return conn.execute(text("SELECT holder, term, acquired_at, expires_at FROM service_leases")).one_or_none()


def _pid(holder: str) -> int:
    return int(holder.split(":")[-2])


def _crawl_held(engine: Engine, leader: str, since: float) -> Any:
    """On PostgreSQL, the leader's crawl still running, held on the table lock: whenever it started,
    since a crawl that began just before `since` and reached the catalog after the lock waits on
    it too (and no later crawl can start behind it). On SQLite, whose locks would hold every
    process, a crawl is too quick to catch: any crawl that started after `since`."""
    postgres = engine.dialect.name == "postgresql"
    started = [
        r for r in _runs(engine) if r.holder == leader and (r.finished_at is None if postgres else r.started_at > since)
    ]
    if not started or not postgres:
        return started[-1] if started else None
    with engine.connect() as conn:
        waiting = conn.execute(
            text("SELECT count(*) FROM pg_locks WHERE relation = 'environments'::regclass AND NOT granted")
        ).scalar_one()
    return started[-1] if waiting else None


def _kill_leader_mid_crawl(engine: Engine, servers: list[ProcessServer]) -> tuple[str, float, float]:
    """Kill -9 the leader while it crawls; returns (its holder id, the kill's time, its lease's end)."""
    leader = _wait("a leader", lambda: _lease(engine)).holder
    _wait("a finished crawl", lambda: [r for r in _runs(engine) if r.holder == leader and r.finished_at])
    server = next(s for s in servers if s.proc.pid == _pid(leader))
    # Before the lock: a crawl that starts between the two counts too (it then waits on the lock, and
    # no later crawl could start behind it).
    since = _now(engine)
    with ExitStack() as stack:
        if engine.dialect.name == "postgresql":
            # Hold the crawl: its next read of the catalog waits on this lock until the kill.
            conn = stack.enter_context(engine.connect())
            stack.enter_context(conn.begin())  # rolled back when the stack closes, after the kill
            conn.execute(text("LOCK TABLE environments IN ACCESS EXCLUSIVE MODE"))
        _wait("the leader's crawl to start", lambda: _crawl_held(engine, leader, since), timeout=10)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        killed_at = _now(engine)
        lease = _lease(engine)
    assert not running(server.proc.pid)
    assert lease.holder == leader, "another process took the lease while its holder still renewed it"
    return leader, killed_at, lease.expires_at


def test_one_leader_runs_the_duties_and_another_takes_over_within_a_lease(
    hubs: list[ProcessServer], engine: Engine
) -> None:
    postgres = engine.dialect.name == "postgresql"
    first, killed_1, expiry_1 = _kill_leader_mid_crawl(engine, hubs)
    runs = _runs(engine)
    assert {r.holder for r in runs} == {first}, "a process that was not the leader crawled"
    if postgres:
        assert runs[-1].finished_at is None, "the kill did not land inside a crawl"

    second = _wait(
        "another process to take over",
        lambda: next((r for r in _runs(engine) if r.holder != first and r.finished_at), None),
        timeout=TAKEOVER_S + 30,
    )
    lease = _lease(engine)
    assert lease.holder == second.holder and lease.term == runs[-1].term + 1
    assert lease.acquired_at >= expiry_1 - 0.05, "the lease was taken while the dead leader's lease still ran"
    takeover_s = second.started_at - killed_1
    assert 0 < takeover_s <= TAKEOVER_S, f"takeover took {takeover_s:.2f}s (lease {LEASE_S}s)"

    third, killed_2, expiry_2 = _kill_leader_mid_crawl(engine, hubs)
    assert third == second.holder
    last = _wait(
        "the last process to take over",
        lambda: next((r for r in _runs(engine) if r.holder not in (first, third) and r.finished_at), None),
        timeout=TAKEOVER_S + 30,
    )
    assert 0 < last.started_at - killed_2 <= TAKEOVER_S
    assert _lease(engine).acquired_at >= expiry_2 - 0.05

    # Never two crawls at once: every run starts after the previous one ended (or its process died).
    runs = _runs(engine)
    assert len({r.holder for r in runs}) == 3
    ends = {first: killed_1, third: killed_2}
    for before, after in itertools.pairwise(runs):
        end = before.finished_at if before.finished_at is not None else ends[before.holder]
        assert after.started_at >= end, f"two crawls overlapped: {before} and {after}"
        assert after.term >= before.term
    print(f"takeover after kill -9: {takeover_s:.2f}s and {last.started_at - killed_2:.2f}s (lease {LEASE_S}s)")
