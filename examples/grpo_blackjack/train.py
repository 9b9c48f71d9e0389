"""Train a language model to play blackjack with GRPO (TRL) against envs/blackjack_env.

    python examples/grpo_blackjack/train.py --output-dir runs/tiny            # CPU, tiny model, ~1 min
    python examples/grpo_blackjack/train.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 300 \\
        --batch-size 32 --num-generations 8 --max-new-tokens 8 --output-dir runs/qwen   # a GPU

Without `--model` it trains a tiny Llama-shaped model created from a config (random weights) with
a word-level tokenizer built from blackjack's vocabulary in code: no downloads. It proves the loop
(rollouts on real env servers, rewards, gradient steps, metrics, a checkpoint), not a good player.

It starts `--servers` blackjack servers on 127.0.0.1 (or uses `--env-url` ones), and writes to
`--output-dir`: `metrics.jsonl` (every logged step), `episodes.jsonl` (every episode record),
`summary.json`, and the trained model and tokenizer in `checkpoint/`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = ROOT / "envs" / "blackjack_env"
INSTRUCTION = "You play blackjack. Reply with one word: hit or stand."

CARDS = [r + s for r in ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K") for s in ("♠", "♥", "♦", "♣")]
WORDS = ["hit", "stand", "You", "play", "blackjack", "Reply", "with", "one", "word", "action", "or", "New", "hand", "Your", "total", "soft", "The", "dealer", "shows", "and", "draw", "bust", "on", "has", "Dealer's", "win", "lose", "Push", "your", "bet", "is", "returned", "Blackjack", "!", "stand", "to", "collect", "it", "Action"]
VOCABULARY = [*WORDS, *CARDS, *(str(n) for n in range(0, 32)), *[".", ",", ":", "(", ")", "+", "-", "'", ";"]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a Hub id or local path (default: a tiny model built in code)")
    p.add_argument("--output-dir", default="runs/grpo_blackjack")
    p.add_argument("--steps", type=int, default=30, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16, help="episodes per step (per device)")
    p.add_argument("--num-generations", type=int, default=4, help="episodes per GRPO group (same deal)")
    p.add_argument("--learning-rate", type=float, default=None, help="default: 3e-3 for the tiny model, 1e-6 otherwise")
    p.add_argument("--max-turns", type=int, default=6)
    p.add_argument("--max-new-tokens", type=int, default=4, help="tokens per answer")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--servers", type=int, default=2, help="blackjack servers to start on 127.0.0.1")
    p.add_argument("--env-url", nargs="*", default=None, help="use these servers instead of starting some")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bf16", action="store_true", help="train in bfloat16 (GPUs)")
    return p.parse_args(argv)


# -- env servers --------------------------------------------------------------------------------------------


# -- model ------------------------------------------------------------------------------------------------


def load_model(name: str | None, seed: int, bf16: bool) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from openenv.training.tiny import tiny_causal_lm

    if name is None:
        return tiny_causal_lm(VOCABULARY, hidden_size=64, layers=2, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(name, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16 if bf16 else torch.float32)
    return model, tokenizer


def _param_stats(model: Any) -> tuple[float, Any]:
    import torch

    flat = torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])
    return float(flat.abs().sum()), flat


def answer_format(prompts: list[Any], completions: list[Any], turn_completions: list[list[str]], **kw: Any) -> list[float]:
    """Reward for answering in the expected form: the share of answer words that are hit or stand."""
    scores = []
    for answers in turn_completions:
        shares = []
        for answer in answers:
            words = answer.lower().split()
            shares.append(sum(w in ("hit", "stand") for w in words) / len(words) if words else 0.0)
        scores.append(sum(shares) / len(shares) if shares else 0.0)
    return scores


# -- training ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from openenv.training import openenv_grpo_kwargs, parse_choice

    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path, episodes_path = out / "metrics.jsonl", out / "episodes.jsonl"
    metrics_path.write_text("")
    episodes_path.write_text("")
    model, tokenizer = load_model(args.model, args.seed, args.bf16)
    _, before = _param_stats(model)

    class JsonlMetrics(TrainerCallback):
        def on_log(self, _args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            with metrics_path.open("a") as f:
                f.write(json.dumps({"step": state.global_step, **(logs or {})}) + "\n")

    def save_episodes(batch: Any) -> None:
        with episodes_path.open("a") as f:
            for record in batch:
                row = record.to_dict()
                row.pop("extra", None)  # token transcripts: large, and in the trainer's logs anyway
                for turn in row["turns"]:
                    turn["prompt"] = turn["prompt"]["text"] if isinstance(turn["prompt"], dict) else turn["prompt"]
                    turn.pop("completion_ids", None)
                    turn.pop("logprobs", None)
                f.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")

    rows = args.steps * args.batch_size
    dataset = Dataset.from_dict({"prompt": [INSTRUCTION] * rows})
    tiny = args.model is None
    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_steps=args.steps,
        max_completion_length=args.max_new_tokens * args.max_turns,
        temperature=args.temperature,
        learning_rate=args.learning_rate or (3e-3 if tiny else 1e-6),
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        bf16=args.bf16,
        use_cpu=not _has_cuda(),
        disable_tqdm=True,
    )

    # The env folder is served as --servers local processes (or use --env-url servers).
    env = args.env_url or str(ENV_DIR)
    rollout_kwargs = openenv_grpo_kwargs(
        env,
        parse_action=parse_choice("action", ["hit", "stand"], default="stand"),
        servers=args.servers,
        provider_options={"venv": False},  # this interpreter: blackjack needs nothing more
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        base_seed=args.seed * 1_000_003,
        turn_format="text" if tiny else "auto",
        on_batch=save_episodes,
        reward_funcs=[answer_format],
    )
    try:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            callbacks=[JsonlMetrics()],
            **rollout_kwargs,
        )
        started = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - started
    finally:
        rollout_kwargs["rollout_func"].close()  # stop the servers it started

    checkpoint = out / "checkpoint"
    trainer.save_model(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    abs_sum, after = _param_stats(trainer.model)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    rewards = [h["rewards/env_reward/mean"] for h in logs if "rewards/env_reward/mean" in h]
    formats = [h["rewards/answer_format/mean"] for h in logs if "rewards/answer_format/mean" in h]
    summary = {
        "model": args.model or "tiny (built in code)",
        "steps": trainer.state.global_step,
        "episodes": sum(1 for _ in episodes_path.open()),
        "train_seconds": round(elapsed, 2),
        "param_abs_sum": abs_sum,
        "param_l2_change": float((after - before).norm()),
        "reward_first_5_steps": sum(rewards[:5]) / max(1, len(rewards[:5])),
        "reward_last_5_steps": sum(rewards[-5:]) / max(1, len(rewards[-5:])),
        "answer_format_first_5_steps": sum(formats[:5]) / max(1, len(formats[:5])),
        "answer_format_last_5_steps": sum(formats[-5:]) / max(1, len(formats[-5:])),
        "checkpoint": str(checkpoint),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return summary


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


if __name__ == "__main__":
    main()
