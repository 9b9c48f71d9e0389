"""Env servers as Ray actors on a real 3-node cluster: spread, replaced, and a node killed mid-batch."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from openenv.client.pool import EnvPool
from openenv.errors import EnvDisconnectedError
from openenv.training import PolicyInput, RolloutEngine, parse_choice
from tests.ray.conftest import RayCluster
from tests.support.servers import ROOT

BLACKJACK = ROOT / "envs" / "blackjack_env"
SERVER_ENV = {"PYTHONPATH": str(ROOT)}
HIT_OR_STAND = parse_choice("action", ["hit", "stand"])


def answers(url: str) -> bool:
    """Whether something still listens at `url`. Only a refused connection says nothing does: a
    connect that times out on a loaded machine proves nothing either way."""
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex((parts.hostname or "", parts.port or 0)) != errno.ECONNREFUSED


async def wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def test_the_client_base_import_does_not_load_ray() -> None:
    code = "import sys, openenv, openenv.training, openenv.client.pool, openenv.client.providers; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_bad_arguments_say_what_to_pass() -> None:
    from openenv.client.providers import RayProvider
    from openenv.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"env_dir=\.\.\. or image="):
        RayProvider()
    with pytest.raises(ConfigurationError, match="replicas must be >= 1"):
        EnvPool.ray(BLACKJACK, size=0)


async def test_servers_spread_over_nodes_and_a_dead_actor_is_replaced(ray_cluster: RayCluster) -> None:
    import ray

    async with EnvPool.ray(BLACKJACK, size=2, env=SERVER_ENV, health_interval_s=0.2) as pool:
        provider = pool.providers[0]
        nodes = {pool.node_of(u) for u in pool.urls}
        assert len(pool.urls) == 2 and len(nodes) == 2 and nodes <= ray_cluster.node_ids()  # one server per node

        async with pool.session() as env:
            await env.reset(seed=1)
            victim = next(r for r in provider.replicas if r.url == env.base_url.rstrip("/"))
            ray.kill(victim.actor)
            t0 = time.monotonic()
            with pytest.raises(EnvDisconnectedError):
                for _ in range(200):  # the session ends as soon as the actor is gone
                    await env.step({"action": "stand"})
                    await env.reset(seed=1)
            assert time.monotonic() - t0 < 5
        assert await wait_until(lambda: not answers(victim.url), 5), "the dead actor's server still listens"

        assert await wait_until(lambda: pool.replacements == 1 and len(pool.urls) == 2, 60), pool
        assert victim.url not in pool.urls
        async with pool.session() as env:  # the replacement serves
            assert (await env.reset(seed=1)).observation["player_total"] > 0
        assert all(f"--- {url} (node " in provider.logs() for url in pool.urls)  # each actor's server output
        urls = list(pool.urls)
    for url in urls:
        assert await wait_until(lambda u=url: not answers(u), 5), f"{url} still listens after close()"


async def test_a_node_killed_mid_batch_loses_no_episode(ray_cluster: RayCluster) -> None:
    async with EnvPool.ray(BLACKJACK, size=2, env=SERVER_ENV, health_interval_s=0.2) as pool:
        by_id = {n.node_id: n for n in ray_cluster.workers}
        doomed_url = next(u for u in pool.urls if pool.node_of(u) in by_id)
        doomed = pool.node_of(doomed_url)
        pids = ray_cluster.pids_of(by_id[doomed])
        assert len(pids) > 2, pids  # at least its raylet, its actor's worker and that worker's env server
        killed: list[float] = []
        forget: list[asyncio.Future[None]] = []

        async def policy(inp: PolicyInput) -> str:
            if inp.episode == 40 and not killed:  # with episodes in flight on both nodes
                killed.append(time.time())
                ray_cluster.kill_node(pids)
                forget.append(
                    asyncio.ensure_future(asyncio.to_thread(ray_cluster.cluster.remove_node, by_id[doomed], False))
                )
                # This episode holds on until the node's server is gone: a fast batch could otherwise end
                # before the kill lands, with nothing in flight there left to replay.
                assert await wait_until(lambda: not answers(doomed_url), 10), "the killed node's server still answers"
            await asyncio.sleep(0.02)
            return "hit" if inp.observation["player_total"] < 17 else "stand"

        engine = RolloutEngine(pool, policy, concurrency=8, parse_action=HIT_OR_STAND, step_timeout_s=10)
        batch = await engine.run(160, base_seed=700)
        await forget[0]

        assert killed and len(batch) == 160 and not batch.failed
        assert all(r.status == "done" for r in batch)
        assert all(r.node in ray_cluster.node_ids() for r in batch)  # every record names its node
        assert any(r.node == doomed for r in batch)  # the killed node served part of the batch
        replayed = [(r.index, r.node == doomed, r.errors) for r in batch.retried]
        assert replayed and all(r.node != doomed for r in batch.retried), (
            replayed,
            batch.elapsed_s,
            time.time() - killed[0],
            [(r.index, r.url, r.attempts, r.errors) for r in batch if r.node == doomed][-6:],
            doomed_url,
        )
        assert await wait_until(lambda: pool.replacements >= 1 and len(pool.urls) == 2, 60), pool
        survivors = {pool.node_of(u) for u in pool.urls}
        assert doomed not in survivors and len(survivors) == 2  # the replacement runs on the third node
        later = [r for r in batch if r.started_at > killed[0] + 5]
        assert all(r.node != doomed for r in later)


def test_servers_die_with_the_driver(ray_cluster: RayCluster, tmp_path) -> None:
    """A driver that exits without closing its pool leaves no env server running."""
    script = tmp_path / "driver.py"
    script.write_text(
        "import os, sys, ray\n"
        "from openenv.client.providers.ray import RayProvider\n"
        f"ray.init(address={ray_cluster.cluster.address!r}, log_to_driver=False, configure_logging=False)\n"
        f"p = RayProvider({str(BLACKJACK)!r}, replicas=1, env={SERVER_ENV!r})\n"
        "print(p.start(), flush=True)\n"
        "os._exit(0)\n"  # no close, no atexit: Ray removes the driver's actors, the kernel their servers
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    url = out.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:")
    deadline = time.monotonic() + 30
    while answers(url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not answers(url), "the server of a driver that exited is still running"
