"""The engine survives env servers that die mid-batch: lost episodes are replayed elsewhere."""

from __future__ import annotations

import asyncio
import time

import pytest

from openenv.training import PolicyInput, RolloutEngine, parse_choice
from tests.support.servers import ProcessServer
from tests.training.conftest import blackjack_process

HIT_OR_STAND = parse_choice("action", ["hit", "stand"])


async def slow_strategy(inp: PolicyInput) -> str:
    await asyncio.sleep(0.01)  # a model thinking: keeps episodes in flight when the server dies
    return "hit" if inp.observation["player_total"] < 17 else "stand"


def outcome(record) -> tuple:
    return (record.seed, record.status, record.prompts, record.actions, record.rewards, record.total_reward)


@pytest.mark.slow
async def test_a_server_killed_mid_batch_loses_no_episode(blackjack_servers: list[ProcessServer]) -> None:
    urls = [s.url for s in blackjack_servers]
    victim = blackjack_servers[1]
    killed_at: list[float] = []

    async def policy(inp: PolicyInput) -> str:
        if inp.episode == 80 and not killed_at:  # a third into the batch, with episodes in flight everywhere
            victim.proc.kill()
            killed_at.append(time.time())
        return await slow_strategy(inp)

    engine = RolloutEngine(urls, policy, concurrency=12, parse_action=HIT_OR_STAND, step_timeout_s=10)
    batch = await engine.run(240, base_seed=5000)
    assert victim.proc.wait(5) is not None

    assert len(batch) == 240 and not batch.failed
    assert all(r.status == "done" for r in batch)
    retried = batch.retried
    assert retried, "no episode was in flight on the killed server"
    for record in retried:
        assert record.url != victim.url  # finished on a healthy server
        assert any(victim.url.replace("http", "ws") in e or victim.url in e for e in record.errors)
    # Episodes (re)started after the kill went to the healthy servers only.
    later = [r for r in batch if r.started_at > killed_at[0] + 0.05]
    assert later and {r.url for r in later} <= {urls[0], urls[2]}

    # Each record is what the seed gives on a healthy server: a retry starts from a fresh reset,
    # never from the half-played hand of the lost session.
    reference = await RolloutEngine(urls[0], slow_strategy, concurrency=12, parse_action=HIT_OR_STAND).run(
        240, base_seed=5000
    )
    assert [outcome(r) for r in batch] == [outcome(r) for r in reference]


@pytest.mark.slow
async def test_all_servers_gone_means_failed_records_not_a_hang() -> None:
    server = blackjack_process()
    server.wait()
    url = server.url
    server.stop()
    engine = RolloutEngine([url], slow_strategy, concurrency=4, parse_action=HIT_OR_STAND, max_attempts=2)
    batch = await asyncio.wait_for(engine.run(4), 30)
    assert len(batch.failed) == 4
    for record in batch:
        assert record.attempts == 2 and len(record.errors) == 2
        assert "cannot connect" in record.errors[0] and "is the server running?" in record.errors[0]


@pytest.mark.slow
async def test_a_restarted_server_is_used_again() -> None:
    """A lost server rests, then gets sessions again once it answers (e.g. its pool restarted it)."""
    first = blackjack_process()
    first.wait()
    first.stop()
    engine = RolloutEngine([first.url], slow_strategy, concurrency=2, parse_action=HIT_OR_STAND, max_attempts=5)
    revived: list[ProcessServer] = []

    async def restart_soon() -> None:
        await asyncio.sleep(0.3)
        revived.append(blackjack_process(port=first.port))

    restarter = asyncio.create_task(restart_soon())
    try:
        batch = await asyncio.wait_for(engine.run(4), 60)
    finally:
        await restarter
        for server in revived:
            server.stop()
    assert all(r.status == "done" for r in batch)
    assert any(r.attempts > 1 and "cannot connect" in r.errors[0] for r in batch)


@pytest.mark.slow
async def test_engine_runs_on_an_env_pool() -> None:
    """A pool from openenv.client.pool is just another way to get server URLs (and a client class)."""
    from blackjack_env import BlackjackEnv

    from openenv.client.pool import EnvPool
    from tests.support.servers import ROOT

    async with EnvPool.process(ROOT / "envs" / "blackjack_env", 2, venv=False, client_cls=BlackjackEnv) as pool:

        async def policy(inp: PolicyInput) -> str:
            return "hit" if inp.observation.player_total < 17 else "stand"

        engine = RolloutEngine(pool, policy, concurrency=8, parse_action=HIT_OR_STAND)
        assert engine.client_cls is BlackjackEnv
        batch = await engine.run(32, base_seed=77)
        assert all(r.status == "done" for r in batch)
        assert {r.url for r in batch} == set(pool.urls) and len(pool.urls) == 2
