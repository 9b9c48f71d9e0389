"""Without Ray: a RolloutEngine given a pool follows the pool's servers as they change mid-batch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from openenv.training import PolicyInput, RolloutEngine, parse_choice
from tests.support.servers import ProcessServer
from tests.training.conftest import blackjack_processes


class MovingPool:
    """What the engine reads of a pool: its current URLs and the node behind each."""

    def __init__(self, urls: list[str], nodes: dict[str, str]) -> None:
        self.urls = urls
        self.nodes = nodes

    def node_of(self, url: str) -> str | None:
        return self.nodes.get(url)


@pytest.fixture()
def two_servers() -> Iterator[list[ProcessServer]]:
    with blackjack_processes(2) as servers:
        yield servers


async def test_a_replacement_server_takes_the_episodes_of_the_one_it_replaced(two_servers: list[ProcessServer]) -> None:
    old, new = two_servers
    pool = MovingPool([old.url], {old.url: "node-a", new.url: "node-b"})

    async def policy(inp: PolicyInput) -> str:
        if inp.episode == 20 and pool.urls == [old.url]:  # the pool replaces its only server
            old.proc.kill()
            pool.urls = [new.url]
        await asyncio.sleep(0.005)
        return "hit" if inp.observation["player_total"] < 17 else "stand"

    batch = await RolloutEngine(
        pool, policy, concurrency=4, parse_action=parse_choice("action", ["hit", "stand"]), step_timeout_s=10
    ).run(60, base_seed=1)

    assert not batch.failed and all(r.status == "done" for r in batch)
    assert {r.node for r in batch} == {"node-a", "node-b"}  # records name the node behind their URL
    assert all(r.node == "node-b" for r in batch.retried) and batch.retried
    assert [r.node for r in batch][-10:] == ["node-b"] * 10  # the rest of the batch ran on the replacement
