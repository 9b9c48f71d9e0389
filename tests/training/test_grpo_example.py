"""examples/grpo_blackjack learns blackjack for real on a CPU, judged from its outputs: rollouts on
real servers, gradient steps, logged metrics, a checkpoint that loads and plays like the trained
policy, and held-out hands on which the trained policy beats where it started and always-stand,
and comes within MARGIN of basic strategy, beyond the noise of the cards (paired 95% intervals).

The run is reproducible (each sampled answer draws from its own episode's key, not from batches
that form by timing), so with the seed pinned below the result is the same on every run on this
machine; the other seeds measured with this configuration are listed where MARGIN is set."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv.client.providers import lifecycle
from tests.providers.conftest import RUN_LABEL
from tests.support.servers import ROOT

# The run below should take about a minute and a half on a quiet 2-core machine (estimated from the
# default run's quiet step time; 13 minutes measured at load 9-11 on 2 cores); the subprocess's own
# limit should end it, not the suite's per-test default.
pytestmark = pytest.mark.timeout(1500)

EXAMPLE = ROOT / "examples" / "grpo_blackjack"
# A shorter run than the example's default (600 steps of 512 hands, learning rate 5e-4, KL weight
# 0.05): smaller steps, a faster learning rate and a firmer anchor to the start, judged on more
# held-out hands (6,000, not 2,000: the paired intervals are then about +-0.03 wide, not +-0.05).
STEPS, BATCH, GROUP, HANDS = 120, 256, 8, 6000
LEARNING_RATE, BETA, SEED, PROBE_EVERY = 1e-3, 0.2, 0, 40
# How far below basic strategy the paired interval may reach: the simplest rule that beats standing
# (hit below 12, stand from 12) is 0.057 below it exactly, plus about the interval's half-width.
# Measured with these settings (paired 95% intervals on the 6,000 hands; after - before,
# after - always-stand, after - basic strategy):
#   seed 0 (pinned): +0.109 [+0.084, +0.133], +0.089 [+0.069, +0.108], -0.043 [-0.061, -0.025]
#   seed 1:          +0.481 [+0.451, +0.511], +0.074 [+0.046, +0.101], -0.058 [-0.077, -0.039]
#   seed 2:          +0.123 [+0.100, +0.145], +0.105 [+0.083, +0.127], -0.027 [-0.045, -0.009]
#   seed 3:          +0.442 [+0.410, +0.475], +0.043 [+0.014, +0.072], -0.089 [-0.109, -0.069]
# Seed 3 learned less by step 120 than the margin asks (its interval reaches below it), and seed 1
# at 160 steps was back at always-stand: learning is seed-dependent and not monotone here, which
# is why the seed is pinned (the run repeats exactly) rather than the margin widened.
MARGIN = 0.08


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grpo_blackjack")
    try:
        proc = _train(out)
    finally:
        # A run killed midway cannot stop the blackjack servers it started: remove them.
        lifecycle.gc(labels=dict([RUN_LABEL]), docker=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _train(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "train.py"),
            "--output-dir",
            str(out),
            "--steps",
            str(STEPS),
            "--batch-size",
            str(BATCH),
            "--num-generations",
            str(GROUP),
            "--servers",
            "2",
            "--eval-hands",
            str(HANDS),
            "--learning-rate",
            str(LEARNING_RATE),
            "--beta",
            str(BETA),
            "--seed",
            str(SEED),
            "--probe-every",
            str(PROBE_EVERY),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
    )


def _evaluation(run: Path) -> dict[str, Any]:
    return json.loads((run / "evaluation.json").read_text())


@pytest.mark.slow
def test_the_trained_policy_plays_better_than_it_started_and_near_basic_strategy(run: Path) -> None:
    ev = _evaluation(run)
    policies, paired = ev["policies"], ev["paired"]
    for name in ("before", "after", "random", "always_stand", "basic_strategy"):
        assert policies[name]["hands"] == HANDS and len(policies[name]["rewards"]) == HANDS
    # The yardsticks measure what the rules say they should (exact values from the env's rules).
    for name in ("always_stand", "basic_strategy"):
        low, high = policies[name]["ci95"]
        assert low <= ev["exact_expected_return"][name] <= high, (name, policies[name]["mean"])
    # Learned beyond noise: on the same held-out hands, paired intervals.
    assert paired["after_minus_before"]["ci95"][0] > 0.0, paired["after_minus_before"]
    assert paired["after_minus_before"]["mean"] > 0.03, paired["after_minus_before"]
    assert paired["after_minus_always_stand"]["ci95"][0] > 0.0, paired["after_minus_always_stand"]
    assert paired["after_minus_basic_strategy"]["ci95"][0] > -MARGIN, paired["after_minus_basic_strategy"]
    assert policies["after"]["answer_format"] >= 0.95


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
    probes = _evaluation(run)["probes"]
    assert [p["step"] for p in probes] == list(range(0, STEPS + 1, PROBE_EVERY))
    svg = (run / "reward.svg").read_text()
    assert svg.startswith("<svg") and "basic strategy" in svg and "greedy, held-out hands" in svg


@pytest.mark.slow
def test_episodes_were_played_on_the_servers(run: Path) -> None:
    urls: set[str] = set()
    by_seed: dict[int, set[str]] = {}
    count = 0
    with (run / "episodes.jsonl").open() as f:
        for line in f:
            e = json.loads(line)
            count += 1
            urls.add(e["url"])
            assert e["status"] in ("done", "truncated")
            assert e["turns"][0]["prompt"].startswith("dealer ")
            assert all(t["action"]["action"] in ("hit", "stand") for t in e["turns"])
            if e["status"] == "done":
                assert e["total_reward"] == e["turns"][-1]["reward"]
            by_seed.setdefault(e["seed"], set()).add(e["turns"][0]["prompt"])
    assert count == STEPS * BATCH
    assert len(urls) == 2  # spread over both servers
    # One GRPO group shares a seed: the same first deal.
    assert len(by_seed) == STEPS * BATCH // GROUP and all(len(p) == 1 for p in by_seed.values())


@pytest.mark.slow
def test_checkpoint_loads_and_plays_like_the_trained_policy(run: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.spec_from_file_location("grpo_blackjack_train", EXAMPLE / "train.py")
    assert spec and spec.loader
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)

    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["param_l2_change"] > 0.01
    model = AutoModelForCausalLM.from_pretrained(run / "checkpoint")
    tokenizer = AutoTokenizer.from_pretrained(run / "checkpoint")
    total = float(sum(p.detach().abs().sum() for p in model.parameters()))
    assert total == pytest.approx(summary["param_abs_sum"], rel=1e-5)

    # The loaded checkpoint makes every first decision the trained model made.
    ev = _evaluation(run)
    chart = train.decision_chart(model, tokenizer)
    assert chart == ev["charts"]["after"]
    # The recorded agreement with basic strategy is this chart's, and training raised it.
    agreement = ev["chart_agreement"]
    assert agreement["after"] == pytest.approx(train.chart_agreement(chart))
    assert agreement["after"] > agreement["before"], agreement
