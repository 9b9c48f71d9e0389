"""examples/grpo_blackjack trains for real on a CPU: rollouts on real servers, rewards, gradient
steps, logged metrics and a checkpoint that loads, checked from its outputs, not its exit code."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT

STEPS = 40


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grpo_blackjack")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "grpo_blackjack" / "train.py"), "--output-dir", str(out),
         "--steps", str(STEPS), "--batch-size", "16", "--num-generations", "8", "--servers", "2"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.mark.slow
def test_every_step_logged_losses_rewards_and_rollout_metrics(run: Path) -> None:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    for r in steps:
        assert math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"])
        assert -1.0 <= r["rewards/env_reward/mean"] <= 1.5  # blackjack's payoffs
        assert 0.0 <= r["rewards/answer_format/mean"] <= 1.0
        assert r["openenv/episode_length"] >= 1 and r["openenv/failed_frac"] == 0
        assert r["openenv/episodes_per_s"] > 0
    assert sum(r["grad_norm"] > 0 for r in steps) >= STEPS // 2  # real gradient steps
    # The model learns the answer format (random at first): the loop's signal reaches the weights.
    first = sum(r["rewards/answer_format/mean"] for r in steps[:5]) / 5
    last = sum(r["rewards/answer_format/mean"] for r in steps[-5:]) / 5
    assert last > first + 0.1, (first, last)


@pytest.mark.slow
def test_episodes_were_played_on_the_servers(run: Path) -> None:
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == STEPS * 16
    urls = {e["url"] for e in episodes}
    assert len(urls) == 2  # spread over both servers
    for e in episodes:
        assert e["status"] in ("done", "truncated")
        assert e["turns"] and "Reply with one action: hit or stand." in e["turns"][0]["prompt"]
        assert all(t["action"]["action"] in ("hit", "stand") for t in e["turns"])
        if e["status"] == "done":
            assert e["total_reward"] == e["turns"][-1]["reward"]
    # One GRPO group (8 rows) shares a seed: the same first deal.
    by_seed: dict[int, set[str]] = {}
    for e in episodes:
        by_seed.setdefault(e["seed"], set()).add(e["turns"][0]["prompt"])
    assert len(by_seed) == STEPS * 2 and all(len(p) == 1 for p in by_seed.values())


@pytest.mark.slow
def test_checkpoint_loads_and_holds_the_trained_weights(run: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["param_l2_change"] > 0.01
    model = AutoModelForCausalLM.from_pretrained(run / "checkpoint")
    tokenizer = AutoTokenizer.from_pretrained(run / "checkpoint")
    total = float(sum(p.detach().abs().sum() for p in model.parameters()))
    assert total == pytest.approx(summary["param_abs_sum"], rel=1e-5)
    ids = tokenizer("Your hand : 7♣ A♦ . Reply with one action : hit or stand .", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > ids.shape[1]
