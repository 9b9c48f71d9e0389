"""Issue 23: several Hub processes share one set of limits through the database. Two real API
processes (`openenv hub serve`) behind a round-robin proxy accept what one would, not twice as
much; the play caps count the sessions of every process; a process killed outright loses no
accepted write and its play sessions stop counting once their leases expire. Run on SQLite
(processes of one host) and PostgreSQL (processes of many)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from hub_service.play import PlayLimit
from hub_service.play.sessions import PlayManager
from hub_service.quota import LeaseBook
from hub_service.serve import settings_env
from hub_service.settings import HubSettings
from hub_service.webhooks.models import WebhookDelivery
from tests.hub.web.test_hostile_play import hostile_env, live_space
from tests.support.rr_proxy import RoundRobinProxy, round_robin_proxy
from tests.support.servers import ROOT, ProcessServer, serve_app

pytestmark = pytest.mark.slow

BURST = 20
SECRET = "s3cret"


def _hubs(tmp: Path, db_url: str, count: int = 2) -> list[ProcessServer]:
    """`count` API processes on one database, each as `openenv hub serve` runs on its own host."""
    (tmp / "envs").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENENV_HUB_")}
    env.update(
        {
            "OPENENV_HUB_WEBSITE": "false",
            "OPENENV_HUB_BUILDER": "process",
            "OPENENV_HUB_LOCAL_SOURCE": str(tmp / "envs"),
            "OPENENV_HUB_RATE_API_BURST": str(BURST),
            "OPENENV_HUB_RATE_API_PER_MINUTE": "6",  # a token every 10 s: the test ends well before many refill
            "OPENENV_HUB_RATE_WEBHOOK_BURST": str(BURST),
            "OPENENV_HUB_RATE_WEBHOOK_PER_MINUTE": "6",
            "OPENENV_HUB_WEBHOOK_SECRET": SECRET,
        }
    )
    openenv = str(Path(sys.executable).parent / "openenv")
    servers = []
    for i in range(count):
        cmd = [openenv, "hub", "serve", "--workers", "0", "--reindex-every", "0", "--database-url", db_url]
        servers.append(ProcessServer([*cmd, "--data-dir", str(tmp / f"data-{i}")], cwd=ROOT, env=env))
    return servers


@pytest.fixture()
def two_hubs(
    tmp_path: Path, db_url: str, clean_factory: sessionmaker[Session]
) -> Iterator[tuple[list[ProcessServer], RoundRobinProxy, str]]:
    servers = _hubs(tmp_path, db_url)
    with ExitStack() as stack:
        for server in servers:
            stack.callback(server.stop)
        for server in servers:
            server.wait("/api/v1/health", timeout=90)
        # Their own health checks drew from the bucket: start the load with a full one.
        with clean_factory.begin() as s:
            s.execute(text("DELETE FROM rate_buckets"))
        proxy = stack.enter_context(round_robin_proxy([("127.0.0.1", s.port) for s in servers]))
        yield servers, proxy, f"http://127.0.0.1:{proxy.port}"


def _get(url: str) -> httpx.Response:
    return httpx.get(url, headers={"Connection": "close"}, timeout=30)  # each request a new connection


def test_two_api_processes_behind_a_proxy_accept_the_limit_once_not_twice(two_hubs) -> None:
    servers, proxy, url = two_hubs
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: _get(f"{url}/api/v1/envs"), range(3 * BURST)))
    accepted = [r for r in replies if r.status_code == 200]
    refused = [r for r in replies if r.status_code == 429]
    assert len(accepted) + len(refused) == len(replies), {r.status_code for r in replies}
    # One shared bucket: the burst (and a token it refilled meanwhile at most), where two
    # processes counting for themselves would have let 2 × BURST through.
    assert BURST <= len(accepted) <= BURST + 1, len(accepted)
    assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert all(r.json()["error"]["code"] == "rate_limited" for r in refused)
    assert all(proxy.served[s.port] >= BURST for s in servers), proxy.served  # both processes took their share


def _hook(client: httpx.Client, i: int) -> tuple[int, int | None]:
    """POST webhook number `i`: (status, the delivery id it was recorded as), status 0 if the connection broke."""
    payload = {
        "event": {"action": "update", "scope": "repo"},
        "repo": {"type": "model", "name": f"load/model-{i}"},
        "webhook": {"id": "load", "version": 3},
    }
    try:
        reply = client.post("/webhooks/hf", json=payload, headers={"X-Webhook-Secret": SECRET, "Connection": "close"})
    except httpx.TransportError:  # in flight on the process that was killed
        return 0, None
    return reply.status_code, reply.json().get("delivery") if reply.status_code in (200, 202) else None


def test_killing_one_process_mid_load_loses_no_accepted_write_and_the_limit_holds(
    two_hubs, clean_factory: sessionmaker[Session]
) -> None:
    servers, proxy, url = two_hubs
    victim, survivor = servers
    done = threading.Semaphore(0)
    killed_after: list[int] = []

    def killer() -> None:
        for _ in range(BURST // 2):
            done.acquire()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        killed_after.append(sum(proxy.served.values()))

    def send(i: int) -> tuple[int, int | None]:
        try:
            with httpx.Client(base_url=url, timeout=30) as client:
                return _hook(client, i)
        finally:
            done.release()

    threading.Thread(target=killer, daemon=True).start()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(send, range(3 * BURST)))
    assert killed_after and victim.proc.returncode == -signal.SIGKILL
    statuses = [status for status, _ in outcomes]
    accepted = [delivery for status, delivery in outcomes if status in (200, 202)]
    broken = statuses.count(0)
    # Only requests in flight on the killed process, or queued in its listening socket as it died.
    assert broken <= 8, statuses
    assert set(statuses) <= {0, 200, 202, 429}, statuses
    # The limit held across the kill: the survivor knew what the victim had accepted.
    assert len(accepted) <= BURST + 1, len(accepted)
    assert len(accepted) + broken >= BURST, statuses
    assert proxy.served[survivor.port] > proxy.served[victim.port]  # new requests went to the survivor
    # Every write a client was told was accepted is in the database.
    with clean_factory() as s:
        stored = set(s.scalars(select(WebhookDelivery.id)))
        tokens = s.execute(text("SELECT tokens FROM rate_buckets WHERE category = 'webhook'")).scalar_one()
    assert None not in accepted and set(accepted) <= stored
    assert tokens < 1  # the shared bucket is spent, whichever process spent it


def test_play_caps_count_the_sessions_of_every_process_until_a_dead_ones_leases_expire(
    hub_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    import asyncio

    settings = hub_settings.model_copy(
        update={
            "play_max_sessions": 4,
            "play_max_sessions_per_visitor": 3,
            "play_visitor_share": 1.0,
            "play_lease_s": 2.0,
            "play_instance_linger_s": 0.0,
        }
    )
    with serve_app(hostile_env()) as env_url:
        env_id = live_space(clean_factory, env_url, "passed")
        holder = subprocess.Popen(
            [sys.executable, "-m", "tests.support.play_holder", env_id, "mallory", "3"],
            cwd=ROOT,
            env={**os.environ, **settings_env(settings)},
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            line = holder.stdout.readline()
            assert json.loads(line)["opened"] == 3, line

            async def here() -> float:
                play = PlayManager(settings, clean_factory)
                owner, name = env_id.split("/")
                try:
                    with pytest.raises(PlayLimit, match="you already have 3 play sessions"):
                        await play.open("t-m", "mallory", owner, name)  # her 3 are on the other process
                    await play.open("t-b", "bob", owner, name)
                    with pytest.raises(PlayLimit, match="all 4 play sessions of this Hub are in use"):
                        await play.open("t-c", "carol", owner, name)
                    holder.send_signal(signal.SIGKILL)
                    holder.wait(10)
                    killed = time.monotonic()

                    async def eventually_open(tab: str, visitor: str) -> None:
                        while True:  # the dead process's sessions count until their leases run out
                            try:
                                await play.open(tab, visitor, owner, name)
                                return
                            except PlayLimit:
                                assert time.monotonic() - killed < settings.play_lease_s + 5
                                await asyncio.sleep(0.2)

                    await eventually_open("t-c", "carol")
                    await eventually_open("t-m", "mallory")  # one of hers has expired
                    return time.monotonic() - killed
                finally:
                    await play.aclose()

            waited = asyncio.run(here())
            assert waited <= settings.play_lease_s + 5
            # This process closed its own sessions. The dead one's leases were last renewed before it was
            # killed, so each has expired play_lease_s after the kill at the latest (mallory needed only
            # one of hers gone to open again: the others may have had a little time left then).
            time.sleep(max(0.0, settings.play_lease_s + 0.5 - waited))
            assert LeaseBook(clean_factory.kw["bind"], lease_s=1).held() == 0
        finally:
            if holder.poll() is None:
                holder.kill()
            holder.wait(10)
