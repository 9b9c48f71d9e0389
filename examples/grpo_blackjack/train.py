"""Teach a language model to play blackjack with GRPO (TRL) against envs/blackjack_env servers.

    python examples/grpo_blackjack/train.py --output-dir runs/tiny          # CPU, tiny model, a few minutes
    python examples/grpo_blackjack/train.py --model Qwen/Qwen2.5-0.5B-Instruct --bf16 --steps 300 \\
        --batch-size 64 --num-generations 8 --max-new-tokens 4 --output-dir runs/qwen   # a GPU

Without `--model` it trains a tiny Llama-shaped model created from a config (random weights) with
a word-level tokenizer built in code from the words the model reads: no downloads.

Each turn the model reads the facts a decision depends on (`total 14 hard dealer 10`) and
answers `hit` or `stand`. Rows of one GRPO group play the same deal, so their advantages compare
decisions, not luck. With `--branch-at K [K ...]` a group instead plays its first K turns once
and forks into its rows at that state (the "fork" extension): the rows then differ only by the
decisions after the branch point (the groups take the listed K values in turn). Before and
after training (and every `--probe-every` steps) the greedy policy plays `--eval-hands`
held-out hands, the same ones random play, always-stand and basic strategy play, so the result
can be judged against them with paired confidence intervals.

It starts `--servers` blackjack servers on 127.0.0.1 (or uses `--env-url` ones), and writes to
`--output-dir`: `metrics.jsonl` (every logged step), `episodes.jsonl` (every training episode),
`evaluation.json` (every policy's held-out results), `reward.svg` (the plot), `summary.json`,
and the trained model and tokenizer in `checkpoint/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import plot  # noqa: E402  (this folder's modules)
import strategy  # noqa: E402

ROOT = HERE.parents[1]
ENV_DIR = ROOT / "envs" / "blackjack_env"
INSTRUCTION = "blackjack : hit or stand ?"
LLM_INSTRUCTION = "You play blackjack. Reply with one word: hit or stand."
EVAL_SEED_BASE = 1_000_000_000  # held out: training seeds count up from --seed * 1,000,003
VOCABULARY = [
    "hit",
    "stand",
    "blackjack",
    "or",
    "total",
    "soft",
    "hard",
    "dealer",
    "A",
    "Action",
    *(str(n) for n in range(0, 32)),
    ":",
    "?",
    ".",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a Hub id or local path (default: a tiny model built in code)")
    p.add_argument("--output-dir", default="runs/grpo_blackjack")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=512, help="episodes per step (per device)")
    p.add_argument("--num-generations", type=int, default=16, help="episodes per GRPO group (same deal)")
    p.add_argument("--learning-rate", type=float, default=None, help="default: 5e-4 for the tiny model, 1e-6 otherwise")
    p.add_argument("--lr-schedule", default="constant", help="transformers' scheduler name (constant, linear, cosine)")
    p.add_argument("--max-turns", type=int, default=6)
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="tokens per answer (default: 1 for the tiny model, 4 otherwise)",
    )
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--format-weight", type=float, default=0.5, help="weight of the answer-format reward")
    p.add_argument(
        "--beta", type=float, default=0.05, help="KL penalty towards the starting model (keeps it exploring)"
    )
    p.add_argument(
        "--scale-rewards",
        default="none",
        choices=["none", "group", "batch"],
        help="GRPO's advantage scaling (none: raw reward differences within a deal)",
    )
    p.add_argument(
        "--unparsed", default="stand", choices=["stand", "random"], help="what an answer naming no action plays"
    )
    p.add_argument(
        "--format-warmup",
        type=int,
        default=100,
        help="tiny model: steps teaching the answer form before GRPO (0: none)",
    )
    p.add_argument("--eval-hands", type=int, default=2000, help="held-out hands played before and after training")
    p.add_argument(
        "--probe-every", type=int, default=25, help="steps between greedy probes on held-out hands (0: none)"
    )
    p.add_argument("--probe-hands", type=int, default=500)
    p.add_argument("--servers", type=int, default=2, help="blackjack servers to start on 127.0.0.1")
    p.add_argument("--env-url", nargs="*", default=None, help="use these servers instead of starting some")
    p.add_argument(
        "--branch-at",
        type=int,
        nargs="+",
        default=None,
        help="branched groups: turns played once before a group forks into its rows (groups take the values in turn)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bf16", action="store_true", help="train in bfloat16 (GPUs)")
    return p.parse_args(argv)


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


def teach_format(model: Any, tokenizer: Any, steps: int, seed: int) -> None:
    """Teach the tiny model the answer's form only: `hit` or `stand`, each half the time, whatever the cards.

    A randomly initialised model says `hit` or `stand` in about 3% of its answers, one of them
    far more often than the other; on the env reward alone GRPO then settles on that one word
    everywhere before it ever tries the other where it pays (measured here: always-stand, every
    run). This warm-up contains no blackjack knowledge: each answer position is trained towards
    probability 1/2 for each word on made-up hands and transcripts of one to three turns.
    """
    import random

    import torch

    rng = random.Random(seed)
    ids = tokenizer.convert_tokens_to_ids(["hit", "stand"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(steps):
        texts = []
        for _ in range(32):
            turns = [
                f"dealer {rng.choice(['A', *map(str, range(2, 11))])} {rng.choice(['hard', 'soft'])} total {rng.randint(4, 21)}"
                for _ in range(rng.randint(1, 3))
            ]
            texts.append(
                f"{INSTRUCTION}\n" + "".join(f"{t} {rng.choice(['hit', 'stand'])}\n" for t in turns[:-1]) + turns[-1]
            )
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        logp = torch.log_softmax(model(**batch).logits[:, -1], dim=-1)
        loss = -logp[:, ids].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


DEALER_CARDS = ["A", *map(str, range(2, 11))]
FIRST_DECISIONS = {"hard": range(4, 21), "soft": range(13, 21)}  # every two-card hand but a natural


def decision_chart(model: Any, tokenizer: Any) -> dict[str, dict[str, dict[str, str]]]:
    """The tiny model's greedy answer to every first decision: chart[kind][dealer][total] = word.

    Each hand is asked on its own (no padding), exactly as a game's first turn shows it, so a
    loaded checkpoint can be checked against the model that was trained.
    """
    import torch

    chart: dict[str, dict[str, dict[str, str]]] = {}
    was_training = bool(model.training)
    model.eval()
    for kind, totals in FIRST_DECISIONS.items():
        for dealer in DEALER_CARDS:
            row = chart.setdefault(kind, {}).setdefault(dealer, {})
            for total in totals:
                ids = tokenizer(f"{INSTRUCTION}\ndealer {dealer} {kind} total {total}", return_tensors="pt")[
                    "input_ids"
                ]
                with torch.no_grad():
                    logits = model(input_ids=ids.to(model.device)).logits[0, -1]
                row[str(total)] = tokenizer.convert_ids_to_tokens(int(logits.argmax()))
    model.train(was_training)
    return chart


def chart_agreement(chart: dict[str, dict[str, dict[str, str]]]) -> float:
    """The share of the chart's cells where it makes basic strategy's decision."""
    cells = [
        answer == strategy.basic_strategy(int(total), kind == "soft", 1 if dealer == "A" else int(dealer))
        for kind, rows in chart.items()
        for dealer, row in rows.items()
        for total, answer in row.items()
    ]
    return sum(cells) / len(cells)


def _param_stats(model: Any) -> tuple[float, Any]:
    import torch

    flat = torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])
    return float(flat.abs().sum()), flat


def _answer_share(answers: list[str]) -> float:
    shares = []
    for answer in answers:
        words = answer.lower().replace(".", " ").split()
        shares.append(sum(w in ("hit", "stand") for w in words) / len(words) if words else 0.0)
    return sum(shares) / len(shares) if shares else 0.0


def parse_answer(seed: int, unparsed: str) -> Any:
    """`hit` or `stand`, whichever the answer names first; an answer naming neither plays `unparsed`.

    `stand` (the default) ends the hand: what comes after a hit is then judged on the hit, not on
    a random follow-up. `random` plays either move (seeded by `seed`).
    """
    import random

    from openenv.training import parse_choice

    choose, rng = parse_choice("action", ["hit", "stand"], default=""), random.Random(seed)

    def parse(text: str, observation: Any) -> dict[str, str]:
        action = choose(text, observation)
        if action["action"]:
            return action
        return {"action": rng.choice(("hit", "stand")) if unparsed == "random" else unparsed}

    return parse


def answer_format(
    prompts: list[Any], completions: list[Any], turn_completions: list[list[str]], **kw: Any
) -> list[float]:
    """Reward for answering in the expected form: the share of answer words that are hit or stand."""
    return [_answer_share(answers) for answers in turn_completions]


# -- evaluation -------------------------------------------------------------------------------------------


def _summarise(batch: Any, formatted: bool) -> dict[str, Any]:
    rewards = [float(r.total_reward) for r in batch]
    failed = [r.seed for r in batch if r.status not in ("done", "truncated")]
    if failed:
        raise RuntimeError(f"{len(failed)} evaluation hands did not finish (seeds {failed[:5]}...)")
    mean, low, high = strategy.mean_ci(rewards)
    out: dict[str, Any] = {"hands": len(rewards), "mean": mean, "ci95": [low, high], "rewards": rewards}
    if formatted:
        out["answer_format"] = sum(_answer_share([t.completion or "" for t in r.turns]) for r in batch) / len(rewards)
    return out


def play_baselines(urls: Any, seeds: list[int]) -> dict[str, dict[str, Any]]:
    """Random play, always-stand and basic strategy on the held-out hands."""
    from openenv.training import RolloutEngine

    policies = {
        "random": strategy.random_policy,
        "always_stand": strategy.rule_policy(strategy.always_stand),
        "basic_strategy": strategy.rule_policy(strategy.basic_strategy),
    }
    out = {}
    for name, policy in policies.items():
        batch = RolloutEngine(urls, policy, concurrency=64, max_turns=21).run_sync(seeds=seeds)
        out[name] = _summarise(batch, formatted=False)
    return out


def compare(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Paired differences on the same hands: after - before, after - always-stand, after - basic strategy."""
    after = results["after"]["rewards"]
    out = {}
    for other in ("before", "always_stand", "basic_strategy", "random"):
        mean, low, high = strategy.paired_ci(after, results[other]["rewards"])
        out[f"after_minus_{other}"] = {"mean": mean, "ci95": [low, high]}
    return out


# -- training ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from openenv.training import openenv_grpo_kwargs
    from openenv.training._transcript import TextFormat

    tiny = args.model is None
    instruction = INSTRUCTION if tiny else LLM_INSTRUCTION
    max_new_tokens = args.max_new_tokens or (1 if tiny else 4)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics_path, episodes_path = out / "metrics.jsonl", out / "episodes.jsonl"
    metrics_path.write_text("")
    episodes_path.write_text("")
    model, tokenizer = load_model(args.model, args.seed, args.bf16)
    if tiny and args.format_warmup:
        teach_format(model, tokenizer, args.format_warmup, args.seed)
    if args.beta and not args.model:  # TRL loads the KL reference from the model's path: save the start
        model.save_pretrained(out / "start")
        model.config._name_or_path = str(out / "start")
    _, before_params = _param_stats(model)
    eval_seeds = [EVAL_SEED_BASE + i for i in range(args.eval_hands)]
    probe_seeds = eval_seeds[: args.probe_hands]
    probes: list[dict[str, Any]] = []
    played = {"env_steps": 0, "resets": 0, "groups_ended_before_branching": 0}

    def save_episodes(batch: Any) -> None:
        # What the env did: a branched group's prefix is played once, its rows' own turns each.
        prefixes = {r.extra["group"]: r.extra["branch_turn"] for r in batch if "group" in r.extra}
        played["env_steps"] += sum(prefixes.values()) + sum(r.length - r.extra.get("branch_turn", 0) for r in batch)
        played["resets"] += len(prefixes) if prefixes else len(batch)
        # A hand the prefix ended (a stand, a bust) leaves its group one episode n times: no signal.
        ended = {r.extra["group"] for r in batch if "group" in r.extra and r.length == r.extra["branch_turn"] > 0}
        played["groups_ended_before_branching"] += len(ended)
        # Lean rows (a default run plays 300,000 hands): who played where, and each decision.
        with episodes_path.open("a") as f:
            for r in batch:
                turns = [
                    {
                        "prompt": t.prompt if isinstance(t.prompt, str) else getattr(t.prompt, "text", str(t.prompt)),
                        "completion": t.completion,
                        "action": t.action,
                        "reward": t.reward,
                    }
                    for t in r.turns
                ]
                row = {"seed": r.seed, "url": r.url, "status": r.status, "total_reward": r.total_reward, "turns": turns}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    # The env folder is served as --servers local processes (or use --env-url servers).
    env = args.env_url or str(ENV_DIR)
    rollout_kwargs = openenv_grpo_kwargs(
        env,
        parse_action=parse_answer(args.seed, args.unparsed),
        observation_text=strategy.decision_text if tiny else None,  # others read the env's own text
        servers=args.servers,
        provider_options={"venv": False},  # this interpreter: blackjack needs nothing more
        max_turns=args.max_turns,
        max_new_tokens=max_new_tokens,
        base_seed=args.seed * 1_000_003,
        # The tiny model answers right after the total (the fact that matters most); others get a cue.
        turn_format=(lambda tok: TextFormat(tok, cue="")) if tiny else "auto",
        on_batch=save_episodes,
        reward_funcs=[answer_format],
        branch_at=args.branch_at,
    )
    rollout = rollout_kwargs["rollout_func"]

    def evaluate(m: Any, seeds: list[int]) -> dict[str, Any]:
        return _summarise(rollout.evaluate(m, tokenizer, seeds, instruction=instruction), formatted=True)

    class JsonlMetrics(TrainerCallback):
        def on_log(self, _args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            with metrics_path.open("a") as f:
                f.write(json.dumps({"step": state.global_step, **(logs or {})}) + "\n")

    class Probe(TrainerCallback):
        """The greedy policy on held-out hands every few steps: the learning curve without exploration noise."""

        def on_step_end(self, _args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if args.probe_every and model is not None and state.global_step % args.probe_every == 0:
                result = evaluate(model, probe_seeds)
                probes.append(
                    {"step": state.global_step, "mean": result["mean"], "answer_format": result["answer_format"]}
                )

    rows = args.steps * args.batch_size
    dataset = Dataset.from_dict({"prompt": [instruction] * rows})
    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_steps=args.steps,
        max_completion_length=max_new_tokens * args.max_turns,
        temperature=args.temperature,
        learning_rate=args.learning_rate or (5e-4 if tiny else 1e-6),
        lr_scheduler_type=args.lr_schedule,
        reward_weights=[1.0, args.format_weight],
        beta=args.beta,
        scale_rewards=args.scale_rewards,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        bf16=args.bf16,
        use_cpu=not _has_cuda(),
        disable_tqdm=True,
    )
    results: dict[str, dict[str, Any]] = {}
    try:
        started = time.perf_counter()
        results.update(play_baselines(rollout.env, eval_seeds))
        results["before"] = evaluate(model, eval_seeds)
        charts = {"before": decision_chart(model, tokenizer)} if tiny else {}
        if args.probe_every:
            probes.append(
                {
                    "step": 0,
                    "mean": strategy.mean_ci(results["before"]["rewards"][: len(probe_seeds)])[0],
                    "answer_format": results["before"]["answer_format"],
                }
            )
        eval_seconds = time.perf_counter() - started
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            callbacks=[JsonlMetrics(), Probe()],
            **rollout_kwargs,
        )
        started = time.perf_counter()
        trainer.train()
        elapsed = time.perf_counter() - started
        results["after"] = evaluate(trainer.model, eval_seeds)
        if tiny:
            charts["after"] = decision_chart(trainer.model, tokenizer)
    finally:
        rollout.close()  # stop the servers it started

    checkpoint = out / "checkpoint"
    trainer.save_model(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    abs_sum, after_params = _param_stats(trainer.model)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    steps = [
        {
            "step": h["step"],
            "env_reward": h.get("rewards/env_reward/mean"),
            "answer_format": h.get("rewards/answer_format/mean"),
        }
        for h in trainer.state.log_history
        if "loss" in h and "step" in h
    ]
    if not steps:
        steps = [
            {
                "step": i + 1,
                "env_reward": h.get("rewards/env_reward/mean"),
                "answer_format": h.get("rewards/answer_format/mean"),
            }
            for i, h in enumerate(logs)
        ]
    comparison = compare(results)
    evaluation = {
        "seeds": [eval_seeds[0], eval_seeds[-1]],
        "exact_expected_return": {
            "always_stand": strategy.expected_return(strategy.always_stand),
            "basic_strategy": strategy.expected_return(strategy.basic_strategy),
        },
        "policies": results,
        "paired": comparison,
        "probes": probes,
        # The tiny model's first decisions, and how many of them basic strategy would make too.
        "charts": charts,
        "chart_agreement": {k: chart_agreement(c) for k, c in charts.items()},
    }
    (out / "evaluation.json").write_text(json.dumps(evaluation, indent=1))
    plot.write_svg(
        out / "reward.svg",
        steps,
        probes,
        {k: results[k]["mean"] for k in ("random", "always_stand", "basic_strategy")},
        title=f"GRPO on blackjack: {args.model or 'tiny model'}, {args.steps} steps of {args.batch_size} hands"
        + (f", branched at {args.branch_at}" if args.branch_at else ""),
    )
    summary = {
        "model": args.model or "tiny (built in code)",
        "steps": trainer.state.global_step,
        "episodes": sum(1 for _ in episodes_path.open()),
        "branch_at": args.branch_at,
        **played,
        "train_seconds": round(elapsed, 2),
        "eval_seconds_before": round(eval_seconds, 2),
        "param_abs_sum": abs_sum,
        "param_l2_change": float((after_params - before_params).norm()),
        "held_out_hands": args.eval_hands,
        **{f"mean_{k}": v["mean"] for k, v in results.items()},
        **{f"ci95_{k}": v["ci95"] for k, v in results.items()},
        "answer_format_before": results["before"]["answer_format"],
        "answer_format_after": results["after"]["answer_format"],
        **{k: v["mean"] for k, v in comparison.items()},
        **{f"{k}_ci95": v["ci95"] for k, v in comparison.items()},
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
