"""Run the GRPO example over several seeds and state what it learns as a distribution.

    python examples/grpo_blackjack/seeds.py --seeds 0 1 2          # runs train.py once per seed
    python examples/grpo_blackjack/seeds.py --render                 # README's table from results/seeds.json
    python examples/grpo_blackjack/seeds.py --check                  # exit 1 when README and the file differ

Each seed runs `train.py` at its default settings (plus any arguments after `--`) in a process of
its own, into `<runs>/seed-<N>/`. `results/seeds.json` then holds, per seed: the held-out mean
after training, the paired differences against the model before training, always-stand and
basic strategy (each with its 95% interval over the same 2,000 held-out hands), how many of the
tiny model's first decisions basic strategy agrees with before and after, the training time, and
the machine's one-minute load average at the seed's start and end (a run whose load moved by more
than 1.0 is marked noisy). Below them: the median and range over seeds. The median seed's
`evaluation.json`, `summary.json` and `reward.svg` are copied to `results/` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
BEGIN, END = "<!-- seeds -->", "<!-- /seeds -->"
NOISY_LOAD_MOVE = 1.0  # as the benchmarks' tables: a one-minute load average that moved more marks a run noisy
PAIRS = ("after_minus_before", "after_minus_always_stand", "after_minus_basic_strategy")


def _seed_record(seed: int, run_dir: Path, load: tuple[float, float], wall_s: float) -> dict[str, Any]:
    evaluation = json.loads((run_dir / "evaluation.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    policies, paired = evaluation["policies"], evaluation["paired"]
    agreement = evaluation.get("chart_agreement") or {}
    return {
        "seed": seed,
        "mean_before": policies["before"]["mean"],
        "mean_after": policies["after"]["mean"],
        "ci95_after": policies["after"]["ci95"],
        **{k: {"mean": paired[k]["mean"], "ci95": paired[k]["ci95"]} for k in PAIRS},
        "agreement_before": agreement.get("before"),
        "agreement_after": agreement.get("after"),
        "answer_format_after": policies["after"]["answer_format"],
        "train_seconds": summary["train_seconds"],
        "wall_seconds": round(wall_s, 1),
        "load_avg_1m": {"start": round(load[0], 2), "end": round(load[1], 2)},
        "noisy": abs(load[1] - load[0]) > NOISY_LOAD_MOVE,
    }


def _spread(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and range over seeds of each number a row shows."""

    def of(values: list[float]) -> dict[str, float]:
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    out = {k: of([r[k] for r in records]) for k in ("mean_after", "agreement_after", "train_seconds", "wall_seconds")}
    out.update({k: of([r[k]["mean"] for r in records]) for k in PAIRS})
    out["seeds_beating_always_stand"] = sum(r["after_minus_always_stand"]["ci95"][0] > 0 for r in records)
    out["seeds_beating_before"] = sum(r["after_minus_before"]["ci95"][0] > 0 for r in records)
    return out


def _median_seed(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The seed whose gain over always-stand is the median one (the lower middle for an even count)."""
    ranked = sorted(records, key=lambda r: r["after_minus_always_stand"]["mean"])
    return ranked[(len(ranked) - 1) // 2]


def run(seeds: list[int], runs: Path, extra: list[str]) -> dict[str, Any]:
    records = []
    for seed in seeds:
        out = runs / f"seed-{seed}"
        cmd = [sys.executable, str(HERE / "train.py"), "--seed", str(seed), "--output-dir", str(out), *extra]
        print(f"seeds.py: seed {seed}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        load0, started = os.getloadavg()[0], time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        record = _seed_record(seed, out, (load0, os.getloadavg()[0]), time.perf_counter() - started)
        records.append(record)
        print(
            f"seeds.py: seed {seed}: after - always stand {record['after_minus_always_stand']['mean']:+.3f} "
            f"in {record['train_seconds']:.0f} s of training",
            file=sys.stderr,
            flush=True,
        )
    middle = _median_seed(records)
    doc = {
        "command": "python examples/grpo_blackjack/seeds.py --seeds "
        + " ".join(map(str, seeds))
        + (" -- " + " ".join(extra) if extra else ""),
        "train_arguments": extra,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "held_out_hands": json.loads((runs / f"seed-{middle['seed']}" / "summary.json").read_text())["held_out_hands"],
        "seeds": records,
        "over_seeds": _spread(records),
        "median_seed": middle["seed"],
        # The median seed's held-out means of every policy (its evaluation.json, without the per-hand rewards).
        "median_seed_policies": {
            k: {"mean": v["mean"], "ci95": v["ci95"]}
            for k, v in json.loads((runs / f"seed-{middle['seed']}" / "evaluation.json").read_text())[
                "policies"
            ].items()
        },
    }
    RESULTS.mkdir(exist_ok=True)
    for name in ("evaluation.json", "summary.json", "reward.svg"):
        shutil.copy(runs / f"seed-{middle['seed']}" / name, RESULTS / name)
    (RESULTS / "seeds.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _pm(pair: dict[str, Any]) -> str:
    low, high = pair["ci95"]
    return f"{pair['mean']:+.3f} ({low:+.3f} to {high:+.3f})"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def table(doc: dict[str, Any]) -> str:
    """README's block: one row per seed, then the median and range over seeds."""
    rows = [
        "| seed | mean after | after − before | after − always stand | after − basic strategy "
        "| agreement with basic strategy (before → after) | whole run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["seeds"]:
        noisy = " (noisy)" if r["noisy"] else ""
        rows.append(
            f"| {r['seed']}{' (median)' if r['seed'] == doc['median_seed'] else ''} | {r['mean_after']:+.3f} "
            f"| {_pm(r['after_minus_before'])} | {_pm(r['after_minus_always_stand'])} "
            f"| {_pm(r['after_minus_basic_strategy'])} | {_pct(r['agreement_before'])} → {_pct(r['agreement_after'])} "
            f"| {r['wall_seconds'] / 60:.1f} min ({r['train_seconds'] / 60:.1f} of training){noisy} |"
        )
    s = doc["over_seeds"]

    def mr(key: str, fmt: str = "{:+.3f}") -> str:
        return f"{fmt.format(s[key]['median'])} ({fmt.format(s[key]['min'])} to {fmt.format(s[key]['max'])})"

    n = len(doc["seeds"])
    rows.append(
        f"| **median (range) over {n} seeds** | {mr('mean_after')} | {mr('after_minus_before')} "
        f"| **{mr('after_minus_always_stand')}** | {mr('after_minus_basic_strategy')} "
        f"| {_pct(s['agreement_after']['median'])} ({_pct(s['agreement_after']['min'])} to {_pct(s['agreement_after']['max'])}) "
        f"| {s['wall_seconds']['median'] / 60:.1f} min ({s['wall_seconds']['min'] / 60:.1f} to {s['wall_seconds']['max'] / 60:.1f}) |"
    )
    rows.append("")
    rows.append(
        f"Means are per hand over the same {doc['held_out_hands']:,} held-out hands, with 95% intervals of the "
        f"paired differences. The paired interval against always-stand is above zero for "
        f"{s['seeds_beating_always_stand']} of {n} seeds, and against the model before training for "
        f"{s['seeds_beating_before']} of {n}. Command: `{doc['command']}`."
    )
    yardsticks = doc.get("median_seed_policies")
    if yardsticks:
        rows += [
            "",
            f"The median seed ({doc['median_seed']}) against the yardsticks, on the same hands "
            "(`results/evaluation.json`, `results/summary.json`, `results/reward.svg`):",
            "",
            "| policy | mean reward per hand | 95% interval |",
            "|---|---|---|",
        ]
        names = {
            "random": "random play",
            "always_stand": "always stand",
            "before": "the model before GRPO (after `teach_format`)",
            "after": "**the model after GRPO** (greedy)",
            "basic_strategy": "basic strategy",
        }
        for key, label in names.items():
            if key in yardsticks:
                low, high = yardsticks[key]["ci95"]
                rows.append(f"| {label} | {yardsticks[key]['mean']:+.3f} | {low:+.3f} to {high:+.3f} |")
    return "\n".join(rows)


def _with_block(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    head, sep, rest = text.partition(begin)
    if not sep or end not in rest:
        raise SystemExit(f"{README} has no {begin} ... {end} block")
    return f"{head}{begin}\n{block}\n{end}{rest.partition(end)[2]}"


def publish(
    results: Path, block: Callable[[dict[str, Any]], str], begin: str, end: str, check: bool, write: bool
) -> int:
    """README's block from a results file: written when `write`, compared when `check` (1 if it differs)."""
    script = Path(sys.argv[0]).name
    if not results.exists():
        print(f"no {results} yet: run {script} --seeds 0 1 2 first", file=sys.stderr)
        return 1
    text = README.read_text()
    wanted = _with_block(text, block(json.loads(results.read_text())), begin, end)
    if check:
        if wanted != text:
            print(f"{README} does not match {results}: run {script} --render", file=sys.stderr)
            return 1
        return 0
    if write:
        README.write_text(wanted)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", help="run train.py once per seed, then write results/seeds.json")
    p.add_argument("--runs", default="runs/grpo_blackjack_seeds", help="where each seed's run goes")
    p.add_argument("--render", action="store_true", help="write README's table from results/seeds.json")
    p.add_argument("--check", action="store_true", help="exit 1 when README's table differs from results/seeds.json")
    args = p.parse_args(own)
    if args.seeds:
        run(args.seeds, Path(args.runs), extra)
    return publish(RESULTS / "seeds.json", table, BEGIN, END, args.check, bool(args.render or args.seeds))


if __name__ == "__main__":
    sys.exit(main())
