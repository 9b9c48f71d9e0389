"""The TRL integration: GRPOTrainer with openenv_grpo_kwargs trains on real env servers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from openenv import ConfigurationError
from openenv.training import openenv_grpo_kwargs
from openenv.training._transcript import ChatFormat, TextFormat, Transcript
from openenv.training.tiny import tiny_causal_lm, word_tokenizer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
WORDS = ["good", "bad", "seed", "step", "say", "Action", ":", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]


def parse_move(text: str, observation: dict) -> dict:
    return {"move": "good" if text.split()[:1] == ["good"] else "bad"}


def _trainer(model: Any, tokenizer: Any, out: Path, *, batch: int, prompts: int, kwargs: dict[str, Any]) -> GRPOTrainer:
    """A 3-step GRPO trainer on CPU, groups of 4, over `prompts` copies of one prompt."""
    config = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=batch,
        num_generations=4,
        max_steps=3,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["Say good."] * prompts}),
        **kwargs,
    )


def test_grpo_trains_on_an_env_with_reward_components(scored_url: str, tmp_path) -> None:
    model, tokenizer = tiny_causal_lm(WORDS, hidden_size=32, layers=1)
    before = [p.detach().clone() for p in model.parameters()]
    batches = []
    kwargs = openenv_grpo_kwargs(
        scored_url,
        parse_action=parse_move,
        max_turns=3,
        max_new_tokens=2,
        reset_kwargs={"length": 2},
        on_batch=batches.append,
        base_seed=500,
    )
    trainer = _trainer(model, tokenizer, tmp_path, batch=8, prompts=24, kwargs=kwargs)
    trainer.train()

    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 3
    for h in logs:  # the env's rubric parts are logged beside TRL's own metrics
        assert h["openenv/reward_components/format"] == pytest.approx(1.0)  # 0.5 a step, 2 steps
        assert 0.0 <= h["openenv/reward_components/correct"] <= 2.0
        assert h["rewards/env_reward/mean"] == pytest.approx(1.0 + h["openenv/reward_components/correct"])
        assert h["openenv/episode_length"] == 2
    assert any(not (a == b).all() for a, b in zip(before, model.parameters(), strict=True))

    batch = batches[0]
    assert [r.seed for r in batch] == [500, 500, 500, 500, 501, 501, 501, 501]  # one seed per group
    record = batch[0]
    transcript = record.extra["transcript"]
    assert transcript.prompt_ids == tokenizer("Say good.\nseed 500: say good\nAction:")["input_ids"]
    first, second = record.turns
    feedback = tokenizer("\nseed 500: step 1\nAction:", add_special_tokens=False)["input_ids"]
    assert transcript.completion_ids == first.completion_ids + feedback + second.completion_ids
    assert transcript.env_mask == [1] * len(first.completion_ids) + [0] * len(feedback) + [1] * len(
        second.completion_ids
    )
    assert transcript.logprobs[: len(first.completion_ids)] == first.logprobs


def test_branched_groups_share_a_masked_prefix_and_sample_apart_after_it(scored_url: str, tmp_path) -> None:
    """`branch_at`: a group plays its first K turns once and forks; its rows carry the same prefix,
    masked out of the loss, and the policy samples each child on its own key after the branch."""
    model, tokenizer = tiny_causal_lm(WORDS, hidden_size=32, layers=1)
    before = [p.detach().clone() for p in model.parameters()]
    batches = []
    kwargs = openenv_grpo_kwargs(
        scored_url,
        parse_action=parse_move,
        max_turns=3,
        max_new_tokens=2,
        on_batch=batches.append,
        base_seed=800,
        branch_at=[0, 2],  # groups take turns: fork at reset, fork after two turns
    )
    rollout = kwargs["rollout_func"]
    trainer = _trainer(model, tokenizer, tmp_path, batch=8, prompts=24, kwargs=kwargs)
    out = rollout(["Say good."] * 8, trainer)
    batch = batches[0]
    assert [r.seed for r in batch] == [800] * 4 + [801] * 4
    assert [r.extra["branch_turn"] for r in batch] == [0] * 4 + [2] * 4
    assert all(r.status == "done" and r.length == 3 for r in batch)
    late = batch.records[4:]
    shared = late[0].extra["prefix_tokens"]
    assert shared == len(late[0].turns[0].completion_ids or []) + len(
        tokenizer("\nseed 801: step 1\nAction:", add_special_tokens=False)["input_ids"]
    ) + len(late[0].turns[1].completion_ids or [])
    for row, record in zip(out["completion_ids"][4:], late, strict=True):
        assert record.turns[:2] == late[0].turns[:2]  # one prefix, played once
        assert row[:shared] == out["completion_ids"][4][:shared]
        assert out["env_mask"][record.index][:shared] == [0] * shared  # the prefix earns no credit
        assert 1 in out["env_mask"][record.index][shared:]  # the child's own answer does
        assert out["env_reward"][record.index] == record.total_reward == sum(t.reward for t in record.turns)
    assert "prefix_tokens" not in batch[0].extra and out["env_mask"][0][0] == 1  # branched at reset: nothing shared
    # Children sample on keys of their own: their answers after the branch differ.
    assert len({r.turns[2].completion for r in late}) > 1
    assert len({r.turns[0].completion for r in batch.records[:4]}) > 1

    trainer.train()  # the rows' shapes suit TRL, and it learns from them
    assert len([h for h in trainer.state.log_history if "loss" in h]) == 3
    assert any(not (a == b).all() for a, b in zip(before, model.parameters(), strict=True))
    assert [r.seed for r in batches[1]] == [802] * 4 + [803] * 4  # seeds go on counting by group
    assert [r.extra["branch_turn"] for r in batches[1]] == [0] * 4 + [2] * 4


def test_bad_configuration_is_refused_up_front() -> None:
    with pytest.raises(ConfigurationError, match="server URL"):
        openenv_grpo_kwargs("blackjack_env", parse_action=parse_move)
    with pytest.raises(ConfigurationError, match="turn_format"):
        openenv_grpo_kwargs("http://127.0.0.1:1", parse_action=parse_move, turn_format="xml")
    with pytest.raises(ConfigurationError, match="branch_at"):
        openenv_grpo_kwargs("http://127.0.0.1:1", parse_action=parse_move, branch_at=[])


def test_chat_format_appends_exactly_what_the_template_renders() -> None:
    """Tokens built turn by turn equal the tokens of the whole conversation rendered at once."""
    tokenizer = word_tokenizer(["<", ">", "user", "assistant", "system", *WORDS, "hand", "hit", "stand"])
    tokenizer.chat_template = (
        "{% for m in messages %}< {{ m.role }} > {{ m.content }} [EOS] {% endfor %}"
        "{% if add_generation_prompt %}< assistant > {% endif %}"
    )
    fmt = ChatFormat(tokenizer)
    instruction = [{"role": "system", "content": "say good"}, {"role": "user", "content": "seed 1"}]
    eos = tokenizer.eos_token_id
    transcript = Transcript(fmt.first(instruction, "hand 5"))
    history: list[tuple[str, str]] = []
    for obs, answer in [("hand 5", "hit"), ("hand 9", "stand"), ("hand 2", "hit")]:
        ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos]
        transcript.add_completion(ids, None)
        history.append((obs, answer))
        nxt = {"hand 5": "hand 9", "hand 9": "hand 2", "hand 2": "hand 7"}[obs]
        transcript.add_feedback(fmt.feedback(instruction, history, nxt, ids))
    messages = [
        {"role": "system", "content": "say good"},
        {"role": "user", "content": "seed 1\n\nhand 5"},
        {"role": "assistant", "content": "hit"},
        {"role": "user", "content": "hand 9"},
        {"role": "assistant", "content": "stand"},
        {"role": "user", "content": "hand 2"},
        {"role": "assistant", "content": "hit"},
        {"role": "user", "content": "hand 7"},
    ]
    whole = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    whole = list(whole["input_ids"] if hasattr(whole, "keys") else whole)
    assert transcript.context == whole
    assert transcript.env_mask.count(1) == 6  # the three answers and their EOS tokens


def test_text_format() -> None:
    tokenizer = word_tokenizer(WORDS)
    fmt = TextFormat(tokenizer)
    assert tokenizer.decode(fmt.first("say good", "seed 1")) == tokenizer.decode(
        tokenizer("say good\nseed 1\nAction:")["input_ids"]
    )
    assert (
        fmt.feedback("say good", [("seed 1", "good")], "step 1", [])
        == tokenizer("\nstep 1\nAction:", add_special_tokens=False)["input_ids"]
    )


@pytest.mark.slow
def test_an_env_folder_is_served_for_the_trainer() -> None:
    from tests.support.servers import ROOT

    kwargs = openenv_grpo_kwargs(
        str(ROOT / "envs" / "blackjack_env"), parse_action=parse_move, servers=2, provider_options={"venv": False}
    )
    rollout = kwargs["rollout_func"]
    try:
        assert len(rollout.env) == 2 and all(u.startswith("http://127.0.0.1:") for u in rollout.env)
        from openenv.training import RolloutEngine

        batch = RolloutEngine(rollout.env, lambda inp: {"action": "stand"}).run_sync(4)
        assert all(r.status == "done" for r in batch)
    finally:
        rollout.close()
    assert not rollout.providers


def test_evaluate_plays_held_out_seeds_with_the_training_prompts(scored_url: str) -> None:
    model, tokenizer = tiny_causal_lm(WORDS, hidden_size=32, layers=1)
    model.train()
    kwargs = openenv_grpo_kwargs(
        scored_url, parse_action=parse_move, max_turns=3, max_new_tokens=2, reset_kwargs={"length": 2}, base_seed=500
    )
    rollout = kwargs["rollout_func"]
    seeds = [9000, 9001, 9002]
    batch = rollout.evaluate(model, tokenizer, seeds, instruction="Say good.")
    assert [r.seed for r in batch] == seeds and all(r.status == "done" for r in batch)
    record = batch[0]
    # Shown exactly what training shows: the instruction, the observation, the same cue.
    assert record.extra["transcript"].prompt_ids == tokenizer("Say good.\nseed 9000: say good\nAction:")["input_ids"]
    assert all(len(t.completion_ids or []) <= 2 for r in batch for t in r.turns)
    # Greedy by default: the same answers again; and the model is left in the mode it was in.
    again = rollout.evaluate(model, tokenizer, seeds, instruction="Say good.")
    assert [r.completions for r in again] == [r.completions for r in batch]
    assert [r.total_reward for r in again] == [r.total_reward for r in batch]
    assert model.training


def test_grpo_runs_repeat_exactly_however_generation_batches_form(scored_url: str, tmp_path) -> None:
    """Two runs with the same seed play the same answers and take the same steps, although one
    gathers each turn's prompts into one `generate` and the other answers them in small batches."""
    import torch

    def train(window_s: float, max_batch: int) -> tuple[list[dict], list[list[str | None]], list[torch.Tensor], int]:
        model, tokenizer = tiny_causal_lm(WORDS, hidden_size=32, layers=1)
        batches = []
        kwargs = openenv_grpo_kwargs(
            scored_url,
            parse_action=parse_move,
            max_turns=3,
            max_new_tokens=2,
            reset_kwargs={"length": 2},
            on_batch=batches.append,
            base_seed=700,
            batch_window_s=window_s,
        )
        rollout = kwargs["rollout_func"]
        trainer = _trainer(model, tokenizer, tmp_path / f"w{window_s}", batch=16, prompts=48, kwargs=kwargs)
        rollout._setup(trainer)  # the trainer's policy, to cap its batches before the first step
        rollout._policy.max_batch_size = max_batch
        trainer.train()
        logs = [
            {k: h[k] for k in ("loss", "rewards/env_reward/mean", "grad_norm")}
            for h in trainer.state.log_history
            if "loss" in h
        ]
        answers = [r.completions for b in batches for r in b]
        return logs, answers, [p.detach().clone() for p in model.parameters()], rollout._policy.batches

    logs, answers, params, generate_calls = train(0.05, 10_000)
    logs2, answers2, params2, generate_calls2 = train(0.0, 3)
    assert generate_calls2 > generate_calls  # the batches really formed differently
    assert len({a for episode in answers for a in episode}) > 1  # sampled, not one fixed answer
    assert answers2 == answers
    assert logs2 == logs
    assert all(torch.equal(a, b) for a, b in zip(params, params2, strict=True))
