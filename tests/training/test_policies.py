"""Policy adapters: an OpenAI-compatible endpoint (a local stand-in over real HTTP) and a
`transformers` model (a tiny one built in code), each driving real blackjack sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from openenv.training import OpenAIPolicy, PolicyInput, RolloutEngine, TransformersPolicy, parse_choice
from openenv.training.openai_policy import PolicyEndpointError
from openenv.training.records import TokenPrompt
from openenv.training.tiny import tiny_causal_lm
from tests.support.openai_standin import answer, openai_standin
from tests.support.servers import serve_app

HIT_OR_STAND = parse_choice("action", ["hit", "stand"])


@pytest.fixture(scope="module")
def standin() -> Iterator[tuple[str, object]]:
    app = openai_standin(api_key="test-key", models={"tiny-blackjack"})
    with serve_app(app) as url:
        yield url + "/v1", app


async def test_openai_policy_plays_blackjack_through_the_endpoint(standin, blackjack_url: str) -> None:
    base_url, app = standin
    app.state.requests.clear()
    policy = OpenAIPolicy(
        "tiny-blackjack",
        base_url=base_url,
        api_key="test-key",
        system_prompt="You play blackjack.",
        max_tokens=4,
        temperature=0.0,
    )
    batch = await RolloutEngine(blackjack_url, policy, concurrency=8, parse_action=HIT_OR_STAND).run(24, base_seed=3)

    assert all(r.status == "done" for r in batch)
    for record in batch:
        for turn in record.turns:
            assert turn.completion == answer(turn.prompt)  # what the endpoint said is what was played
            assert turn.action == {"action": turn.completion}
    sent = app.state.requests
    assert len(sent) == sum(r.length for r in batch)
    bodies = [r["body"] | {"path": r["path"]} for r in sent]
    first = next(b for b in bodies if b["seed"] == 3 * 1000)
    assert first["path"] == "/v1/chat/completions" and first["model"] == "tiny-blackjack"
    assert first["messages"][0] == {"role": "system", "content": "You play blackjack."}
    assert first["messages"][1]["role"] == "user" and first["messages"][1]["content"] == batch[0].turns[0].prompt
    assert first["max_tokens"] == 4 and first["temperature"] == 0.0


async def test_openai_policy_text_completions(standin, blackjack_url: str) -> None:
    base_url, _ = standin
    policy = OpenAIPolicy("tiny-blackjack", base_url=base_url, api_key="test-key", chat=False)
    batch = await RolloutEngine(blackjack_url, policy, parse_action=HIT_OR_STAND).run(4)
    assert all(r.status == "done" for r in batch)
    assert all(t.completion == " " + answer(t.prompt) for r in batch for t in r.turns)


async def test_openai_policy_errors_name_the_endpoint(standin) -> None:
    base_url, _ = standin
    inp = PolicyInput("total 12", None, 0, 1, 0)
    with pytest.raises(PolicyEndpointError, match="answered 401"):
        await OpenAIPolicy("tiny-blackjack", base_url=base_url, api_key="wrong", max_retries=0)(inp)
    with pytest.raises(PolicyEndpointError, match=r"answered 404.*model name"):
        await OpenAIPolicy("no-such-model", base_url=base_url, api_key="test-key", max_retries=0)(inp)
    with pytest.raises(PolicyEndpointError, match=r"cannot reach.*is it running"):
        await OpenAIPolicy("tiny-blackjack", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout_s=2)(
            inp
        )


WORDS = [
    "hit",
    "stand",
    "New",
    "hand",
    ".",
    "Your",
    "total",
    "the",
    "dealer",
    "shows",
    "Reply",
    "with",
    "one",
    "action",
    ":",
    "or",
]


@pytest.fixture(scope="module")
def tiny() -> tuple[object, object]:
    return tiny_causal_lm(WORDS, hidden_size=32, layers=1)


async def test_transformers_policy_batches_concurrent_calls(tiny) -> None:
    model, tokenizer = tiny
    policy = TransformersPolicy(
        model, tokenizer, max_new_tokens=5, temperature=1.0, max_batch_size=8, batch_window_s=0.05
    )
    prompts = [PolicyInput(f"Your hand : total {10 + i} . hit or stand", None, i, i, 0) for i in range(16)]
    answers = await asyncio.gather(*(policy(p) for p in prompts))
    assert policy.batches == 2  # 16 calls, batches of 8
    eos = tokenizer.eos_token_id
    for a in answers:
        assert 1 <= len(a.token_ids) <= 5 and len(a.logprobs) == len(a.token_ids)
        assert eos not in a.token_ids[:-1]  # cut at the first EOS
        assert all(lp <= 0 for lp in a.logprobs)
        assert a.text == tokenizer.decode(a.token_ids, skip_special_tokens=True)


async def test_transformers_policy_greedy_matches_unbatched_generation(tiny) -> None:
    """Left padding in a batch does not change what the model says."""
    model, tokenizer = tiny
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=4, temperature=0.0, batch_window_s=0.05)
    short = TokenPrompt(tokenizer("hit")["input_ids"])
    long = TokenPrompt(tokenizer("Your hand : total . Reply with one action : hit or stand")["input_ids"])
    together = await asyncio.gather(policy(PolicyInput(short, None, 0, 0, 0)), policy(PolicyInput(long, None, 1, 1, 0)))
    alone = [policy.generate([short.ids])[0], policy.generate([long.ids])[0]]
    assert [a.token_ids for a in together] == [a.token_ids for a in alone]
    for batched, single in zip(together, alone, strict=True):
        assert batched.logprobs == pytest.approx(single.logprobs, abs=1e-4)


async def test_transformers_policy_in_the_engine(tiny, blackjack_url: str) -> None:
    model, tokenizer = tiny
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=3, max_batch_size=16)
    batch = await RolloutEngine(blackjack_url, policy, concurrency=16, parse_action=HIT_OR_STAND, max_turns=4).run(16)
    assert all(r.status in ("done", "truncated") for r in batch)
    assert policy.batches < sum(r.length for r in batch)  # turns were batched
    assert all(t.completion_ids and t.logprobs for r in batch for t in r.turns)


async def test_transformers_policy_samples_the_same_answers_however_calls_are_batched(tiny) -> None:
    """An answer's draws belong to its episode, seed, turn and prompt, not to its batch: the same calls
    answered in one batch, in small batches in another order among other calls, and one by one agree."""
    model, tokenizer = tiny
    group = [PolicyInput("Your hand : total 14 . hit or stand", None, i, 7, 0) for i in range(12)]
    others = [PolicyInput(f"New hand : total {4 + i} . hit or stand", None, 12 + i, 100 + i, i % 3) for i in range(12)]
    calls = group + others

    def policy(seed: int = 0, max_batch_size: int = 64) -> TransformersPolicy:
        return TransformersPolicy(
            model, tokenizer, max_new_tokens=4, max_batch_size=max_batch_size, batch_window_s=0.05, seed=seed
        )

    together = policy()
    one_batch = await asyncio.gather(*(together(c) for c in calls))
    assert together.batches == 1
    small = policy(max_batch_size=5)
    strangers = [PolicyInput(f"Your hand : total {i} .", None, 50 + i, 900 + i, 1) for i in range(7)]
    mixed = await asyncio.gather(*(small(c) for c in [*strangers, *reversed(calls)]))
    assert small.batches == 7
    alone_policy = policy()
    alone = [await alone_policy(c) for c in calls]
    assert alone_policy.batches == len(calls)

    ids = [a.token_ids for a in one_batch]
    assert [a.token_ids for a in reversed(mixed[len(strangers) :])] == ids
    assert [a.token_ids for a in alone] == ids
    for a, b in zip(one_batch, alone, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    # One group's rows share a deal and a prompt, yet each row draws on its own.
    assert len({tuple(a.token_ids or ()) for a in one_batch[: len(group)]}) >= len(group) // 2
    # The policy's seed changes the draws.
    reseeded = policy(seed=1)
    assert [a.token_ids for a in await asyncio.gather(*(reseeded(c) for c in calls))] != ids


def test_transformers_policy_samples_from_the_models_distribution(tiny) -> None:
    """Keyed draws still follow the model: token frequencies match its probabilities, and top-k keeps
    to the k likeliest tokens."""
    import torch

    model, tokenizer = tiny
    ids = tokenizer("Your hand : total 14 . hit or stand")["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), dim=-1)
    n = 4000
    draws = TransformersPolicy(model, tokenizer, max_new_tokens=1).generate([ids] * n)
    counts = torch.bincount(torch.tensor([a.token_ids[0] for a in draws]), minlength=len(probs)).double()
    total_variation = float((counts / n - probs).abs().sum() / 2)
    assert total_variation < 0.06  # sampling noise at 4,000 draws over this vocabulary is about 0.03
    # Direct calls repeat: the same calls in the same order draw the same tokens.
    again = TransformersPolicy(model, tokenizer, max_new_tokens=1).generate([ids] * n)
    assert [a.token_ids for a in again] == [a.token_ids for a in draws]

    top = TransformersPolicy(model, tokenizer, max_new_tokens=1, temperature=0.5, top_k=3).generate([ids] * 500)
    assert {a.token_ids[0] for a in top} == set(torch.topk(probs, 3).indices.tolist())
