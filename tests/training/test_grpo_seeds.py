"""What examples/grpo_blackjack/README.md says about learning over seeds comes from
results/seeds.json (written by seeds.py from each seed's run), and seeds.py reads a run's files
the way train.py writes them. Fast: reads files, trains nothing (test_grpo_example.py trains)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.support.servers import ROOT

EXAMPLE = ROOT / "examples" / "grpo_blackjack"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"grpo_{name}", EXAMPLE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seeds() -> ModuleType:
    return _example("seeds")


def test_the_readme_table_is_the_one_results_seeds_json_gives() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "seeds.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads((EXAMPLE / "results" / "seeds.json").read_text())
    assert len(doc["seeds"]) >= 3 and doc["train_arguments"] == [], "the README states the default run over 3 seeds"
    # The files kept beside it are the median seed's run.
    summary = json.loads((EXAMPLE / "results" / "summary.json").read_text())
    median = next(r for r in doc["seeds"] if r["seed"] == doc["median_seed"])
    assert summary["mean_after"] == median["mean_after"]
    assert summary["steps"] == 600 and summary["held_out_hands"] == doc["held_out_hands"]


def _fake_run(folder: Path, seed: int, gain: float) -> None:
    """A run's files as train.py writes them (only the fields seeds.py reads)."""
    folder.mkdir(parents=True)

    def pair(mean: float) -> dict[str, object]:
        return {"mean": mean, "ci95": [mean - 0.03, mean + 0.03]}

    policies = {
        k: {"mean": m, "ci95": [m - 0.04, m + 0.04], "answer_format": 1.0}
        for k, m in {"random": -0.36, "always_stand": -0.16, "before": -0.15, "after": -0.16 + gain}.items()
    }
    policies["basic_strategy"] = {"mean": -0.03, "ci95": [-0.07, 0.01], "answer_format": 1.0}
    (folder / "evaluation.json").write_text(
        json.dumps(
            {
                "policies": policies,
                "paired": {
                    "after_minus_before": pair(gain - 0.01),
                    "after_minus_always_stand": pair(gain),
                    "after_minus_basic_strategy": pair(gain - 0.13),
                },
                "chart_agreement": {"before": 0.5, "after": 0.6 + seed / 100},
            }
        )
    )
    summary = {"train_seconds": 480.0 + seed, "held_out_hands": 2000, "steps": 600}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_a_seed_that_learned_nothing_shows_in_the_median_range_and_count(tmp_path: Path) -> None:
    seeds = _seeds()
    records = []
    for seed, gain in ((0, 0.09), (1, 0.0), (2, 0.05)):
        _fake_run(tmp_path / str(seed), seed, gain)
        records.append(seeds._seed_record(seed, tmp_path / str(seed), (0.5, 0.7), 500.0))
    over = seeds._spread(records)
    assert over["after_minus_always_stand"] == {"median": 0.05, "min": 0.0, "max": 0.09}
    assert over["seeds_beating_always_stand"] == 2  # seed 1's interval reaches below zero
    assert seeds._median_seed(records)["seed"] == 2
    doc = {
        "seeds": records,
        "over_seeds": over,
        "median_seed": 2,
        "held_out_hands": 2000,
        "command": "python examples/grpo_blackjack/seeds.py --seeds 0 1 2",
    }
    table = seeds.table(doc)
    assert "| 2 (median) |" in table and "+0.050 (+0.000 to +0.090)" in table
    assert "above zero for 2 of 3 seeds" in table
    noisy = seeds._seed_record(3, tmp_path / "0", (0.5, 2.0), 500.0)
    assert noisy["noisy"] and not records[0]["noisy"]


def _branching() -> ModuleType:
    return _example("branching")


def test_the_readme_branching_table_is_the_one_results_branching_json_gives() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "branching.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads((EXAMPLE / "results" / "branching.json").read_text())
    assert doc["train_arguments"] == [], "the README compares the modes at the example's defaults"
    plain, branched = doc["runs"]["plain"], doc["runs"]["branched"]
    assert len(plain) == len(branched) == len(doc["branched_minus_plain"]) >= 3
    assert (
        [r["seed"] for r in plain] == [r["seed"] for r in branched] == [p["seed"] for p in doc["branched_minus_plain"]]
    )
    assert all(r["branch_at"] is None for r in plain) and all(r["branch_at"] == [0, 1] for r in branched)
    # Equal optimizer steps and rows: the modes differ in what the env did, which the file says.
    assert {r["episodes"] for r in plain + branched} == {600 * 512}
    assert all(b["env_steps"] < p["env_steps"] for p, b in zip(plain, branched, strict=True))


def test_branched_minus_plain_is_paired_over_the_same_hands(tmp_path: Path, monkeypatch) -> None:
    branching = _branching()
    hands = {
        "plain": [1.0, -1.0, 0.0, 1.0],
        "branched": [1.0, 1.0, 0.0, -1.0],
        "plain_matched": [1.0, 1.0, 0.0, -1.5],
    }
    asked: list[tuple[str, list[str]]] = []

    def fake_run(seed: int, mode: str, out: Path, extra: list[str]) -> dict[str, object]:
        asked.append((mode, extra))
        _fake_run(out, seed, {"plain": 0.05, "branched": 0.02, "plain_matched": 0.03}[mode])
        evaluation = json.loads((out / "evaluation.json").read_text())
        evaluation["policies"]["after"]["rewards"] = hands[mode]
        (out / "evaluation.json").write_text(json.dumps(evaluation))
        record = branching.seeds._seed_record(seed, out, (0.5, 0.6), 500.0)
        steps = {"plain": 900, "branched": 700, "plain_matched": 705}[mode]
        ended = {"plain": 0, "branched": 30, "plain_matched": 0}[mode]
        at = {"plain": None, "branched": [0, 1], "plain_matched": None}[mode]
        return {
            **record,
            "episodes": 8,
            "env_steps": steps,
            "resets": 100,
            "groups_ended_before_branching": ended,
            "branch_at": at,
        }

    monkeypatch.setattr(branching, "_run", fake_run)
    monkeypatch.setattr(branching, "RESULTS", tmp_path / "branching.json")
    doc = branching.run([4], tmp_path / "runs", [])
    [paired] = doc["branched_minus_plain"]
    assert paired["seed"] == 4 and paired["mean"] == 0.0  # (0 + 2 + 0 - 2) / 4, hand by hand
    assert paired["ci95"][0] < 0 < paired["ci95"][1]
    table = branching.table(json.loads((tmp_path / "branching.json").read_text()))
    assert "| 4 | plain | +0.050 (+0.020 to +0.080) |" in table
    assert "| 30 of 50 |" in table  # of the 100 groups, every other one was set to branch after a decision
    assert "above zero for 0 of 1 seeds and below zero for 0" in table

    # Plain again at the branched run's env steps: 700 of them, at 900 / 600 a step.
    doc = branching.run_matched(tmp_path / "runs", [])
    assert asked[-1] == ("plain_matched", ["--steps", "467"])
    [matched] = doc["branched_minus_plain_matched"]
    assert matched["mean"] == 0.125  # (0 + 0 + 0 + 0.5) / 4
    table = branching.table(json.loads((tmp_path / "branching.json").read_text()))
    assert "| 4 | plain, the branched run's env steps (467 optimizer steps) | +0.030" in table
    assert "branched − plain at equal env steps +0.125" in table
