"""EnvPool: N servers started at once, sessions balanced across them, everything stopped at the end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from echo_env import EchoAction, EchoEnv

from openenv.client.pool import EnvPool
from openenv.client.providers import ProcessProvider, lifecycle
from openenv.errors import EnvTimeoutError, ProviderStartError
from tests.providers.conftest import ECHO_DIR, RUN_LABEL


async def test_64_rollouts_over_4_servers() -> None:
    async with EnvPool.process(ECHO_DIR, 4, client_cls=EchoEnv, venv=False) as pool:
        assert len(set(pool.urls)) == 4
        seen: dict[str, int] = {}

        async def rollout(i: int) -> float:
            async with pool.session() as env:
                seen[env.base_url] = seen.get(env.base_url, 0) + 1
                await env.reset(seed=i)
                result = await env.step(EchoAction(message="x" * (i % 5)))
                await asyncio.sleep(0.01)
                return result.reward

        rewards = await asyncio.gather(*(rollout(i) for i in range(64)))
        assert rewards == [pytest.approx(0.1 * (i % 5)) for i in range(64)]
        assert sorted(seen) == sorted(pool.urls) and min(seen.values()) >= 8  # spread over every server
        pids = [p.proc.pid for p in pool.providers]  # type: ignore[attr-defined]
    assert all(lifecycle.process_identity(pid) is None for pid in pids)
    assert lifecycle.list_running(labels=dict([RUN_LABEL]), docker=False) == []


async def test_capacity_per_server_makes_sessions_wait() -> None:
    async with EnvPool.process(ECHO_DIR, 1, max_sessions_per_instance=1, venv=False) as pool:
        first = await pool.acquire()
        with pytest.raises(EnvTimeoutError, match="no free session slot"):
            await pool.acquire(timeout_s=0.3)
        waiter = asyncio.ensure_future(pool.acquire(timeout_s=10))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await pool.release(first)
        second = await waiter
        assert (await second.reset()).observation["echoed_message"] == "Echo environment ready!"
        await pool.release(second)


async def test_one_failed_start_stops_the_others(tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "broken_env"
    shutil.copytree(ECHO_DIR, broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "server" / "app.py").write_text("raise SystemExit('no data')\n")
    providers = [
        ProcessProvider(ECHO_DIR, venv=False),
        ProcessProvider(broken, venv=False),
        ProcessProvider(ECHO_DIR, venv=False),
    ]
    with pytest.raises(ProviderStartError, match="no data"):
        async with EnvPool(providers):
            pass
    assert lifecycle.list_running(labels=dict([RUN_LABEL]), docker=False) == []


async def test_a_dead_server_is_taken_out_of_rotation() -> None:
    async with EnvPool.process(ECHO_DIR, 2, venv=False) as pool:
        victim = pool.providers[0]
        await victim.astop()
        for _ in range(4):
            async with pool.session() as env:
                assert env.base_url == pool.providers[1].base_url
                await env.reset()
        assert len(pool.urls) == 1


@pytest.mark.docker
async def test_pool_of_containers(echo_image: str) -> None:
    async with EnvPool.docker(echo_image, 3, client_cls=EchoEnv) as pool:
        ids = [p.container_id for p in pool.providers]  # type: ignore[attr-defined]
        clients = [await pool.acquire() for _ in range(6)]
        assert sorted({c.base_url for c in clients}) == sorted(pool.urls)
        for c in clients:
            await c.reset()
    engine = pool.providers[0].client
    assert all(not engine.api.containers(all=True, filters={"id": cid}) for cid in ids)
