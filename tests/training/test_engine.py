"""The rollout engine against real servers: records, seeds, reward components, errors, timeouts."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from blackjack_env import BlackjackAction, BlackjackEnv, BlackjackObservation

from openenv import ConfigurationError
from openenv.training import Completion, PolicyInput, RolloutEngine, parse_choice

HIT_OR_STAND = parse_choice("action", ["hit", "stand"])


async def basic_strategy(inp: PolicyInput) -> str:
    obs = inp.observation
    total = obs["player_total"] if isinstance(obs, dict) else obs.player_total
    return "hit" if total < 17 else "stand"


async def seeded_random(inp: PolicyInput) -> str:
    """A stochastic policy whose randomness comes from the episode's seed and turn: reproducible."""
    await asyncio.sleep(random.random() / 1000)  # finish in a different order each run
    return random.Random(f"{inp.seed}:{inp.turn}").choice(["I hit", "stand please"])


def fingerprint(batch) -> list[tuple]:
    return [(r.seed, r.status, r.prompts, r.completions, r.actions, r.rewards, r.total_reward) for r in batch]


async def test_records_carry_prompts_completions_actions_rewards_and_timing(blackjack_url: str) -> None:
    engine = RolloutEngine(blackjack_url, basic_strategy, concurrency=8, parse_action=HIT_OR_STAND)
    batch = await engine.run(40, base_seed=100)

    assert [r.index for r in batch] == list(range(40))
    assert [r.seed for r in batch] == list(range(100, 140))
    for record in batch:
        assert record.status == "done" and record.attempts == 1 and not record.errors
        assert record.url == blackjack_url
        assert record.length == len(record.turns) >= 1
        first = record.turns[0]
        assert "Reply with one action: hit or stand." in first.prompt  # the observation's text view
        assert first.completion in ("hit", "stand")
        assert first.action == {"action": first.completion}
        assert record.turns[-1].done and not any(t.done for t in record.turns[:-1])
        outcome = record.final_observation["outcome"]
        assert record.total_reward == {"win": 1.0, "blackjack": 1.5, "push": 0.0, "loss": -1.0}[outcome]
        assert record.rewards[-1] == record.total_reward
        assert record.duration_s >= record.env_s > 0 and record.policy_s >= 0
    assert batch.episodes_per_s > 0
    assert batch.mean_reward == pytest.approx(sum(r.total_reward for r in batch) / 40)


async def test_same_seeds_same_episodes_whatever_the_concurrency(blackjack_url: str) -> None:
    one = await RolloutEngine(blackjack_url, seeded_random, concurrency=1, parse_action=HIT_OR_STAND).run(
        30, base_seed=7
    )
    many = await RolloutEngine(blackjack_url, seeded_random, concurrency=16, parse_action=HIT_OR_STAND).run(
        30, base_seed=7
    )
    assert fingerprint(one) == fingerprint(many)
    other = await RolloutEngine(blackjack_url, seeded_random, concurrency=16, parse_action=HIT_OR_STAND).run(
        30, base_seed=8
    )
    assert fingerprint(other) != fingerprint(one)
    explicit = await RolloutEngine(blackjack_url, seeded_random, concurrency=4, parse_action=HIT_OR_STAND).run(
        seeds=[9, 7, 9]
    )
    assert fingerprint(explicit)[1] == fingerprint(one)[0]
    assert fingerprint(explicit)[0] == fingerprint(explicit)[2]


async def test_typed_client_and_action_models(blackjack_url: str) -> None:
    async def policy(inp: PolicyInput) -> BlackjackAction:
        assert isinstance(inp.observation, BlackjackObservation)
        return BlackjackAction(action="stand")

    batch = await RolloutEngine(blackjack_url, policy, client_cls=BlackjackEnv, concurrency=4).run(8)
    assert all(r.status == "done" and r.length == 1 and r.completions == [None] for r in batch)
    assert all(r.actions == [{"action": "stand"}] for r in batch)
    assert all(isinstance(r.final_observation, BlackjackObservation) for r in batch)
    json.dumps([r.to_dict() for r in batch], default=str)  # records serialise


async def test_reward_components_from_observation_metadata(scored_url: str, blackjack_url: str) -> None:
    async def policy(inp: PolicyInput) -> Completion:
        return Completion(
            "good" if inp.turn % 2 == 0 else "meh", token_ids=[1, 2, inp.turn], logprobs=[-0.1, -0.2, -0.3]
        )

    engine = RolloutEngine(
        scored_url, policy, parse_action=lambda text, obs: {"move": text}, reset_kwargs={"length": 3}
    )
    batch = await engine.run(5)
    for record in batch:
        assert record.status == "done" and record.length == 3
        assert [t.reward_components for t in record.turns] == [
            {"correct": 1.0, "format": 0.5},
            {"correct": 0.0, "format": 0.5},
            {"correct": 1.0, "format": 0.5},
        ]
        assert record.reward_components == {"correct": 2.0, "format": 1.5}
        assert record.total_reward == 3.5
        assert record.turns[2].completion_ids == [1, 2, 2] and record.turns[2].logprobs == [-0.1, -0.2, -0.3]
        assert record.completion_tokens == 9
    # An env that reports no components (blackjack) leaves them empty.
    plain = await RolloutEngine(blackjack_url, lambda inp: {"action": "stand"}).run(2)
    assert all(r.turns[0].reward_components is None and r.reward_components == {} for r in plain)


async def test_reset_options_reach_the_env_and_max_turns_truncates(scored_url: str) -> None:
    engine = RolloutEngine(scored_url, lambda inp: {"move": "good"}, max_turns=4, reset_kwargs={"length": 10})
    batch = await engine.run(3)
    assert all(r.status == "truncated" and r.length == 4 for r in batch)
    longer = await engine.run(2, reset_kwargs={"length": 2})
    assert all(r.status == "done" and r.length == 2 for r in longer)


async def test_rejected_actions_and_env_errors_end_only_their_episode(picky_url: str) -> None:
    async def policy(inp: PolicyInput) -> dict:
        return {"move": {0: "bad", 1: "boom"}.get(inp.episode, "ok")}

    batch = await RolloutEngine(picky_url, policy, concurrency=3).run(6)
    bad, boom, *fine = batch.records
    assert (
        bad.status == "error" and bad.attempts == 1 and "VALIDATION_ERROR" in bad.errors[0] and "move" in bad.errors[0]
    )
    assert boom.status == "error" and "boom" in boom.errors[0]
    assert all(r.status == "done" and r.total_reward == 2.0 for r in fine)


async def test_step_timeout_gives_up_on_the_session_and_retries(slow_url: str) -> None:
    async def policy(inp: PolicyInput) -> dict:
        return {"move": "good", "delay_s": 3.0 if inp.episode == 0 else 0.0}

    engine = RolloutEngine(
        slow_url, policy, concurrency=4, step_timeout_s=0.3, max_attempts=2, reset_kwargs={"length": 2}
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    batch = await engine.run(8)
    slow, *rest = batch.records
    assert slow.status == "failed" and slow.attempts == 2
    assert len(slow.errors) == 2 and all("within 0.3s" in e for e in slow.errors)
    assert all(r.status == "done" and r.total_reward == 3.0 for r in rest)
    assert loop.time() - t0 < 2.9  # it did not wait for the 3 s steps


async def test_episode_timeout(scored_url: str) -> None:
    async def dawdle(inp: PolicyInput) -> dict:
        await asyncio.sleep(0.1)
        return {"move": "good"}

    engine = RolloutEngine(scored_url, dawdle, concurrency=2, episode_timeout_s=0.35, reset_kwargs={"length": 100})
    batch = await engine.run(2)
    for record in batch:
        assert record.status == "timeout" and record.attempts == 1
        assert 2 <= record.length <= 4
        assert 0.3 < record.duration_s < 1.0
        assert "episode_timeout_s" in record.errors[0]
    # The worker's session is usable afterwards: a new run on the same engine completes.
    quick = RolloutEngine(scored_url, lambda inp: {"move": "good"}, episode_timeout_s=5, reset_kwargs={"length": 2})
    assert all(r.status == "done" for r in await quick.run(3))


async def test_policy_errors_stop_the_run(blackjack_url: str) -> None:
    async def broken(inp: PolicyInput) -> str:
        raise ValueError("policy bug")

    with pytest.raises(ExceptionGroup) as info:
        await RolloutEngine(blackjack_url, broken, parse_action=HIT_OR_STAND).run(4)
    assert info.group_contains(ValueError, match="policy bug")


async def test_text_answers_need_parse_action(blackjack_url: str) -> None:
    with pytest.raises(ExceptionGroup) as info:
        await RolloutEngine(blackjack_url, lambda inp: "hit").run(1)
    assert info.group_contains(ConfigurationError, match="parse_action")


def test_bad_arguments_say_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="server URL"):
        RolloutEngine("blackjack_env", basic_strategy)
    with pytest.raises(ConfigurationError, match="concurrency"):
        RolloutEngine("http://127.0.0.1:1", basic_strategy, concurrency=0)
    with pytest.raises(ConfigurationError, match="step_timeout_s"):
        RolloutEngine("http://127.0.0.1:1", basic_strategy, step_timeout_s=0)
    engine = RolloutEngine("http://127.0.0.1:1", basic_strategy)
    with pytest.raises(ConfigurationError, match="either"):
        engine.run_sync()


def test_parse_choice() -> None:
    parse = parse_choice("action", ["hit", "stand"], default="stand")
    assert parse("I will HIT now, not stand", None) == {"action": "hit"}
    assert parse("stand, then hit", None) == {"action": "stand"}
    assert parse("no idea", None) == {"action": "stand"}


def test_run_sync_works_inside_a_running_loop(blackjack_url: str) -> None:
    engine = RolloutEngine(blackjack_url, basic_strategy, parse_action=HIT_OR_STAND)

    async def notebook_cell() -> int:  # Jupyter runs cells inside a loop
        return len(engine.run_sync(3))

    assert asyncio.run(notebook_cell()) == 3
