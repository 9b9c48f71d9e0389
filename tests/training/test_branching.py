"""Branching rollouts: GRPO groups forked from one shared state (RolloutEngine.run_branched)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from blackjack_env.server.app import app as blackjack_app

from openenv import SnapshotError, create_app
from openenv.training import RolloutEngine
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_app(blackjack_app) as served:
        yield served


async def test_groups_share_their_prefix_and_only_the_decisions_differ(url: str) -> None:
    rng = random.Random(5)

    async def coin(inp):  # a sampling policy: children of one group choose differently
        return {"action": rng.choice(["hit", "stand"])}

    engine = RolloutEngine(url, coin, concurrency=8, reset_kwargs={"decks": 2})
    batch = await engine.run_branched(6, 4, prefix_steps=1, base_seed=300)
    assert len(batch) == 24 and [r.index for r in batch] == list(range(24))
    for g in range(6):
        group = [r for r in batch if r.extra["group"] == g]
        assert len(group) == 4 and {r.seed for r in group} == {300 + g}
        branch = group[0].extra["branch_turn"]
        assert all(r.extra["branch_turn"] == branch for r in group) and branch <= 1
        assert len({tuple(str(t.action) for t in r.turns[:branch]) for r in group}) == 1  # one shared prefix
        outcome_of: dict[tuple[str, ...], float] = {}
        for r in group:  # the same decisions from the same state meet the same cards: same return
            key = tuple(str(t.action) for t in r.turns)
            assert outcome_of.setdefault(key, r.total_reward) == r.total_reward
        assert all(r.status == "done" for r in group)
    spread = [len({tuple(str(t.action) for t in r.turns) for r in batch if r.extra["group"] == g}) for g in range(6)]
    assert max(spread) > 1  # children of one group did decide differently


async def test_a_server_that_cannot_fork_is_an_error_not_a_silent_fallback() -> None:
    with serve_app(create_app(CountEnv, CountAction, CountObservation)) as plain:
        engine = RolloutEngine(plain, lambda inp: {"message": "x"}, max_turns=2)
        with pytest.raises(SnapshotError, match="FORK_UNSUPPORTED"):
            await engine.run_branched(1, 2)
