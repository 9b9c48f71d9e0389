"""Branched GRPO groups against plain ones, over seeds, at the example's defaults.

    python examples/grpo_blackjack/branching.py --seeds 0 1 2          # 2 runs of train.py per seed
    python examples/grpo_blackjack/branching.py --render                 # README's table from results/branching.json
    python examples/grpo_blackjack/branching.py --check                  # exit 1 when README and the file differ

Per seed it runs `train.py --seed N` twice, one run after the other: plain groups (every row of a
group plays the same deal from the reset) and branched groups (`--branch-at 0 1`: every other
group plays its first turn once, then forks into its 16 rows, so those rows differ only by the
decisions after the first). Both runs of a seed start from the same model and train on the same
deals for the same optimizer steps and rows; what each run spends is recorded beside what it
learned (env steps, resets, training time, the machine's load average). `results/branching.json`
holds each run's held-out results, as `seeds.py` records them, and per seed the paired difference
branched − plain over the same 2,000 held-out hands.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import seeds  # noqa: E402  (this folder's modules)
import strategy  # noqa: E402

RESULTS = HERE / "results" / "branching.json"
BEGIN, END = "<!-- branching -->", "<!-- /branching -->"
MODES = {"plain": [], "branched": ["--branch-at", "0", "1"]}


def _run(seed: int, mode: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """One run of train.py for `mode` (its MODES flags, then `extra`), recorded as seeds.py records a seed."""
    cmd = [sys.executable, str(HERE / "train.py"), "--seed", str(seed), "--output-dir", str(out)]
    cmd += MODES.get(mode, []) + extra
    print(f"branching.py: seed {seed}, {mode}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    load0, started = os.getloadavg()[0], time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    record = seeds._seed_record(seed, out, (load0, os.getloadavg()[0]), time.perf_counter() - started)
    summary = json.loads((out / "summary.json").read_text())
    record.update(
        {k: summary[k] for k in ("episodes", "env_steps", "resets", "groups_ended_before_branching", "branch_at")}
    )
    print(
        f"branching.py: seed {seed}, {mode}: after - always stand {record['after_minus_always_stand']['mean']:+.3f}, "
        f"{record['env_steps']:,} env steps, {record['train_seconds']:.0f} s of training",
        file=sys.stderr,
        flush=True,
    )
    return record


def run(seed_list: list[int], runs: Path, extra: list[str]) -> dict[str, Any]:
    per_mode: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    paired = []
    for seed in seed_list:
        after = {}
        for mode in MODES:
            out = runs / f"seed-{seed}-{mode}"
            per_mode[mode].append(_run(seed, mode, out, extra))
            after[mode] = json.loads((out / "evaluation.json").read_text())["policies"]["after"]["rewards"]
        mean, low, high = strategy.paired_ci(after["branched"], after["plain"])
        paired.append({"seed": seed, "mean": mean, "ci95": [low, high]})
    doc = {
        "command": "python examples/grpo_blackjack/branching.py --seeds "
        + " ".join(map(str, seed_list))
        + (" -- " + " ".join(extra) if extra else ""),
        "modes": {mode: " ".join(args) or "(train.py's defaults)" for mode, args in MODES.items()},
        "train_arguments": extra,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "runs": per_mode,
        "over_seeds": {mode: _spread(records) for mode, records in per_mode.items()},
        "branched_minus_plain": paired,
    }
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def run_matched(runs: Path, extra: list[str]) -> dict[str, Any]:
    """Plain groups again, for as many optimizer steps as give the env steps the branched run of
    the same seed took (from results/branching.json and the runs in `runs`); added to the file."""
    doc = json.loads(RESULTS.read_text())
    plain = {r["seed"]: r for r in doc["runs"]["plain"]}
    matched, paired = [], []
    for b in doc["runs"]["branched"]:
        seed = b["seed"]
        plain_steps = json.loads((runs / f"seed-{seed}-plain" / "summary.json").read_text())["steps"]
        steps = round(b["env_steps"] / (plain[seed]["env_steps"] / plain_steps))
        out = runs / f"seed-{seed}-plain-matched"
        record = _run(seed, "plain_matched", out, ["--steps", str(steps), *extra])
        matched.append({**record, "steps": steps})
        rewards = {
            name: json.loads((runs / f"seed-{seed}-{name}" / "evaluation.json").read_text())["policies"]["after"][
                "rewards"
            ]
            for name in ("branched", "plain-matched")
        }
        mean, low, high = strategy.paired_ci(rewards["branched"], rewards["plain-matched"])
        paired.append({"seed": seed, "mean": mean, "ci95": [low, high]})
    doc["runs"]["plain_matched"] = matched
    doc["over_seeds"]["plain_matched"] = _spread(matched)
    doc["branched_minus_plain_matched"] = paired
    doc["matched_command"] = "python examples/grpo_blackjack/branching.py --matched" + (
        " -- " + " ".join(extra) if extra else ""
    )
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def _spread(records: list[dict[str, Any]]) -> dict[str, Any]:
    out = seeds._spread(records)
    out["env_steps"] = {"median": statistics.median(r["env_steps"] for r in records)}
    return out


def _ended(r: dict[str, Any]) -> str:
    """Groups whose prefix ended the hand, of the groups set to branch after a decision (group k of a
    run takes branch_at[k % len(branch_at)]; a branched run resets once per group)."""
    at = r["branch_at"]
    if not at:
        return "—"
    at = [at] if isinstance(at, int) else at
    aimed = sum(1 for k in range(r["resets"]) if at[k % len(at)] > 0)
    return f"{r['groups_ended_before_branching']:,} of {aimed:,}"


def _label(mode: str, r: dict[str, Any]) -> str:
    if mode == "plain_matched":
        return f"plain, the branched run's env steps ({r['steps']} optimizer steps)"
    return "branched (`--branch-at 0 1`)" if mode == "branched" else "plain"


def _median_line(doc: dict[str, Any], key: str, what: str) -> str:
    pairs = doc[key]
    diffs = [p["mean"] for p in pairs]
    return (
        f"branched − {what} {statistics.median(diffs):+.3f} (range {min(diffs):+.3f} to {max(diffs):+.3f}), its "
        f"interval above zero for {sum(p['ci95'][0] > 0 for p in pairs)} of {len(diffs)} seeds and below zero for "
        f"{sum(p['ci95'][1] < 0 for p in pairs)}"
    )


def table(doc: dict[str, Any]) -> str:
    """README's block: one row per seed and mode, then the paired differences between the modes."""
    rows = [
        "| seed | groups | after − always stand | after − before | agreement with basic strategy (before → after) "
        "| env steps | resets | groups whose first decision ended the hand (no branch) | training time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_seed = {mode: {r["seed"]: r for r in records} for mode, records in doc["runs"].items()}
    for p in doc["branched_minus_plain"]:
        for mode in by_seed:
            r = by_seed[mode][p["seed"]]
            rows.append(
                f"| {r['seed']} | {_label(mode, r)} | {seeds._pm(r['after_minus_always_stand'])} "
                f"| {seeds._pm(r['after_minus_before'])} "
                f"| {seeds._pct(r['agreement_before'])} → {seeds._pct(r['agreement_after'])} | {r['env_steps']:,} "
                f"| {r['resets']:,} | {_ended(r)} | {r['train_seconds'] / 60:.1f} min{' (noisy)' if r['noisy'] else ''} |"
            )
    matched = {p["seed"]: p for p in doc.get("branched_minus_plain_matched", [])}
    rows += ["", "Paired over the same held-out hands, per seed (95% intervals):", ""]
    rows.append(
        "| seed | branched − plain | " + ("branched − plain at the branched run's env steps |" if matched else "")
    )
    rows.append("|---|---|" + ("---|" if matched else ""))
    for p in doc["branched_minus_plain"]:
        rows.append(f"| {p['seed']} | {seeds._pm(p)} |" + (f" {seeds._pm(matched[p['seed']])} |" if matched else ""))
    s = doc["over_seeds"]
    medians = f"{s['plain']['after_minus_always_stand']['median']:+.3f} plain, " + (
        f"{s['plain_matched']['after_minus_always_stand']['median']:+.3f} plain at equal env steps, " if matched else ""
    )
    rows.append("")
    rows.append(
        f"Median over seeds of after − always stand: {medians}"
        f"{s['branched']['after_minus_always_stand']['median']:+.3f} branched. "
        + _median_line(doc, "branched_minus_plain", "plain")
        + ("; " + _median_line(doc, "branched_minus_plain_matched", "plain at equal env steps") if matched else "")
        + f". Commands: `{doc['command']}`"
        + (f", then `{doc['matched_command']}`" if matched else "")
        + "."
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", help="run both modes per seed, then write results/branching.json")
    p.add_argument(
        "--matched",
        action="store_true",
        help="then plain groups for the env steps each seed's branched run took (added to results/branching.json)",
    )
    p.add_argument("--runs", default="runs/grpo_blackjack_branching", help="where each run goes")
    p.add_argument("--render", action="store_true", help="write README's table from results/branching.json")
    p.add_argument(
        "--check", action="store_true", help="exit 1 when README's table differs from results/branching.json"
    )
    args = p.parse_args(own)
    if args.seeds:
        run(args.seeds, Path(args.runs), extra)
    if args.matched:
        run_matched(Path(args.runs), extra)
    return seeds.publish(RESULTS, table, BEGIN, END, args.check, bool(args.render or args.seeds or args.matched))


if __name__ == "__main__":
    sys.exit(main())
