"""The ART integration: episodes the rollout engine plays on a real env server become ART's own
trajectory groups, which ART's own tokenizer step turns into training rows (on CPU)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # art imports litellm: no fetch from the internet

import art
from art.preprocessing.tokenize import tokenize_trajectory_groups
from openai.types.chat.chat_completion import Choice

from openenv import ConfigurationError
from openenv.training import Completion, PolicyInput, RolloutEngine
from openenv.training.art import EpisodeFailed, gather_trajectory_groups, trajectory_groups
from openenv.training.tiny import word_tokenizer

CHAT = (
    "{% for m in messages %}{{ m['role'] }} : {% if m['role'] == 'assistant' %}{% generation %}"
    "{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}{% endif %} . {% endfor %}"
)


def answer(inp: PolicyInput) -> str:
    # Half of each group says "good" (1.5 a step), half "bad" (0.5): the group's rewards differ.
    return "good" if inp.episode % 2 == 0 else "bad"


def parse_move(text: str, observation: dict) -> dict:
    return {"move": text}


def _tokenizer() -> Any:
    tokenizer = word_tokenizer(["system", "user", "assistant", ":", ".", "seed", "say", "good", "bad", "step", "Say"])
    tokenizer.chat_template = CHAT
    return tokenizer


async def test_episodes_become_art_trajectory_groups_that_art_tokenizes(scored_url: str) -> None:
    engine = RolloutEngine(scored_url, answer, parse_action=parse_move, concurrency=4)
    groups = await gather_trajectory_groups(engine, groups=2, group_size=4, base_seed=10, system_prompt="Say good.")

    assert [type(g) for g in groups] == [art.TrajectoryGroup, art.TrajectoryGroup]
    assert [[t.reward for t in g.trajectories] for g in groups] == [[4.5, 1.5, 4.5, 1.5]] * 2
    assert [{t.metadata["seed"] for t in g.trajectories} for g in groups] == [{10}, {11}]
    first = groups[0].trajectories[0]
    assert first.metrics["turns"] == 3 and first.metrics["reward/correct"] == 3.0
    assert first.messages() == [
        {"role": "system", "content": "Say good."},
        {"role": "user", "content": "seed 10: say good"},
        {"role": "assistant", "content": "good"},
        {"role": "user", "content": "seed 10: step 1"},
        {"role": "assistant", "content": "good"},
        {"role": "user", "content": "seed 10: step 2"},
        {"role": "assistant", "content": "good"},
    ]

    # ART's own step from trajectory groups to training rows: the model's answers are what it trains on.
    tokenizer = _tokenizer()
    rows = list(
        tokenize_trajectory_groups(
            tokenizer,
            groups,
            allow_training_without_logprobs=True,
            scale_rewards=True,
            shuffle_group_trajectories=False,
        )
    )
    assert len(rows) == 8
    for row, trajectory in zip(rows, [t for g in groups for t in g.trajectories], strict=True):
        trained = [tok for tok, mask in zip(row.token_ids, row.assistant_mask, strict=True) if mask]
        assert tokenizer.decode(trained).split() == [
            m["content"] for m in trajectory.messages() if m["role"] == "assistant"
        ]
        assert (row.advantage > 0) == (trajectory.reward == 4.5)


async def test_answers_with_token_logprobs_become_choices_art_trains_on_as_sampled(scored_url: str) -> None:
    tokenizer = _tokenizer()

    def sampled(inp: PolicyInput) -> Completion:
        text = "good" if inp.episode == 0 else "bad"
        ids = tokenizer.encode(text, add_special_tokens=False)
        return Completion(text, ids, [-0.25 - inp.episode] * len(ids))

    engine = RolloutEngine(scored_url, sampled, parse_action=parse_move, concurrency=2)
    (group,) = await gather_trajectory_groups(engine, groups=1, group_size=2)
    choices = [m for m in group.trajectories[0].messages_and_choices if isinstance(m, Choice)]
    assert [c.message.content for c in choices] == ["good"] * 3

    rows = list(
        tokenize_trajectory_groups(
            tokenizer,
            [group],
            allow_training_without_logprobs=False,
            scale_rewards=True,
            shuffle_group_trajectories=False,
        )
    )
    assert len(rows) == 2  # without logprobs ART would skip (or refuse) these answers
    for row, episode in zip(rows, (0, 1), strict=True):
        trained = [i for i, (tok, mask) in enumerate(zip(row.token_ids, row.assistant_mask, strict=True)) if mask]
        assert tokenizer.decode([row.token_ids[i] for i in trained]).split() == ["good" if episode == 0 else "bad"] * 3
        assert [row.logprobs[i] for i in trained] == [-0.25 - episode] * 3


async def test_an_episode_the_env_failed_is_its_groups_exception(picky_url: str) -> None:
    def boom_on_second(inp: PolicyInput) -> dict:
        return {"move": "boom" if inp.episode == 1 else "ok"}

    engine = RolloutEngine(picky_url, boom_on_second, concurrency=2)
    (group,) = await gather_trajectory_groups(engine, groups=1, group_size=2)
    assert [t.reward for t in group.trajectories] == [2.0]
    assert [e.type for e in group.exceptions] == [str(EpisodeFailed)]
    assert "episode 1 (seed 0) error" in group.exceptions[0].message
    # an action the policy gave without text: its JSON stands for the agent's turn
    assert {"role": "assistant", "content": '{"move": "ok"}'} in group.trajectories[0].messages()


async def test_groups_must_divide_the_batch(scored_url: str) -> None:
    engine = RolloutEngine(scored_url, answer, parse_action=parse_move)
    batch = await engine.run(3)
    with pytest.raises(ConfigurationError, match="3 episodes do not make groups of 2"):
        trajectory_groups(batch, 2)
    with pytest.raises(ConfigurationError, match="groups and group_size must be 1 or more"):
        await gather_trajectory_groups(engine, groups=0, group_size=2)


def test_importing_the_adapter_leaves_transformers_generate_working() -> None:
    # `import art` patches transformers with a function for older versions (broken on transformers 5):
    # a TransformersPolicy in the same process must still generate.
    import torch

    from openenv.training.tiny import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(["hit", "stand"])
    ids = tokenizer("hit stand", return_tensors="pt")["input_ids"]
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=2, do_sample=False)
    assert out.shape == (1, ids.shape[1] + 2)
