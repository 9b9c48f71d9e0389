"""RFC 008's seven `statistical.*` checks (hub lane, level 4): many episodes of several policies
on the revision's running container, each check an estimate with its 95% confidence interval.

RFC 008 fixes the seven IDs, their lane, level and severity, and leaves what they measure to the
hub operator; docs/validate.md ("The statistical level") says what this Hub plays and decides:

- `random`: actions drawn from the action schema (`hub_service.play.policies.random_action`),
  a fresh draw each step, on `episodes` seeds;
- `constant`: one such action, the same every step (the cheapest strategy there is), on the seeds;
- `empty`: the reward check's empty answer (every text field "", every nullable one null), every
  step, on the seeds (when the action has such a field);
- the oracle plan, and each canary of `capabilities.canaries`, replayed as declared (on their own
  seeds: their actions are written for them) `episodes` times, at most 8;
- difficulty tiers, when `validation/difficulty.json` names them (easiest first): the random
  policy on the seeds with each tier's reset options.

An episode's reward is its last step's reward, as the semantic level reads the oracle and canary
plays. Episodes run a few at a time within `budget_s`; a check that got fewer than
`MIN_EPISODES` episodes of a policy it needs says `skip` with the reason, never `pass`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.validation.rfc008 import ResultV2
from openenv.validation.rfc008.manifest import NormalizedManifest
from openenv.validation.rfc008.policy import Bounds
from openenv.validation.rfc008.runtime import (
    Plan,
    PlanError,
    RuntimeSubject,
    Transcript,
    load_canaries,
    load_plan,
    play_plan,
)

__all__ = ["DIFFICULTY_FILE", "MIN_EPISODES", "StatisticalRun", "statistical_results"]

DIFFICULTY_FILE = "validation/difficulty.json"
MIN_EPISODES = 5  # of a policy, for a confidence interval worth the name
_REPLAYS = 8  # of each declared plan (its own seed): enough to see a reward that varies
_MAX_TIERS = 8  # each tier is `episodes` more episodes of the random policy
_HEADROOM = 0.1  # of the range's width, left above what random play earns
_Z = 1.959964  # the normal's 97.5% quantile


@dataclass(frozen=True)
class Estimate:
    """A policy's rewards: their mean with its 95% interval (Student's t), over `n` episodes."""

    n: int
    mean: float
    low: float
    high: float
    values: list[float]

    @classmethod
    def of(cls, values: list[float]) -> Estimate | None:
        if len(values) < MIN_EPISODES:
            return None
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        half = _t975(len(values) - 1) * sd / math.sqrt(len(values))
        return cls(len(values), mean, mean - half, mean + half, values)

    def shown(self) -> str:
        return f"{self.mean:.4g} (95% CI {self.low:.4g} to {self.high:.4g}, n={self.n})"

    def figures(self) -> dict[str, Any]:
        return {"n": self.n, "mean": round(self.mean, 6), "ci95": [round(self.low, 6), round(self.high, 6)]}


def _t975(df: int) -> float:
    """Student's t 97.5% quantile (Cornish-Fisher expansion; within 0.5% from 4 degrees of freedom)."""
    z = _Z
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def _wilson_low(hits: int, n: int) -> float:
    """The 95% Wilson interval's lower end for a proportion of `hits` in `n`."""
    p, z2 = hits / n, _Z * _Z
    return (p + z2 / (2 * n) - _Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n)


def _wilson_high(hits: int, n: int) -> float:
    """The 95% Wilson interval's upper end for a proportion of `hits` in `n`."""
    p, z2 = hits / n, _Z * _Z
    return (p + z2 / (2 * n) + _Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n)


def _decided(good: bool, bad: bool) -> str:
    """A check's status from its intervals: `pass` when they show the property holds, `fail` when
    they show it does not, and `skip` when they cannot tell (too few episodes for the spread the
    env's rewards have: the Hub's budget, never evidence against the env)."""
    return "pass" if good else "fail" if bad else "skip"


_UNDECIDED = "the intervals cannot tell yet: more episodes (statistical_episodes) would narrow them"


def _variance_high(variance: float, n: int) -> float:
    """The one-sided 95% upper bound of a normal sample's variance (chi-square, Wilson-Hilferty)."""
    df = n - 1
    chi2_05 = df * (1 - 2 / (9 * df) - 1.644854 * math.sqrt(2 / (9 * df))) ** 3
    return df * variance / chi2_05


@dataclass
class StatisticalRun:
    """What the checks read: each policy's episodes (their last rewards), and what went wrong."""

    episodes: int
    budget_s: float
    plays: dict[str, list[float | None]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    tiers: list[str] = field(default_factory=list)
    tiers_error: str | None = None
    canaries: list[str] = field(default_factory=list)
    setup_error: str | None = None  # the oracle or canaries could not be read
    out_of_time: bool = False
    seconds: float = 0.0

    def rewards(self, name: str) -> list[float]:
        return [r for r in self.plays.get(name, []) if r is not None]


def _plan(seed: int, episode_id: str, actions: list[dict[str, Any]], options: dict[str, Any] | None = None) -> Plan:
    return Plan.model_validate(
        {
            "plan_schema_version": "1",
            "reset": {"episode_id": episode_id[:128], "seed": seed, "options": options or {}},
            "actions": actions,
        }
    )


def _read_tiers(root: Path) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    path = root / DIFFICULTY_FILE
    if not path.is_file():
        return [], None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tiers = [(str(t["name"]), dict(t.get("options") or {})) for t in data["tiers"]]
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        return [], (
            f"{DIFFICULTY_FILE} is not "
            '{"tiers": [{"name": ..., "options": {<reset options>}}, ...]} (easiest first): '
            f"{type(exc).__name__}: {exc}"
        )
    if not 2 <= len(tiers) <= _MAX_TIERS:
        return [], f"{DIFFICULTY_FILE} names {len(tiers)} tier(s): from 2 to {_MAX_TIERS} are compared"
    return tiers, None


async def gather(
    s: RuntimeSubject,
    action_schema: dict[str, Any],
    *,
    episodes: int,
    episode_steps: int,
    budget_s: float,
    concurrency: int = 4,
) -> StatisticalRun:
    """Play every policy's episodes on the server of `s` (see the module's docstring)."""
    from hub_service.pipeline.trust_reward import empty_action
    from hub_service.play.policies import random_action

    run = StatisticalRun(episodes=episodes, budget_s=budget_s)
    started = time.monotonic()
    ends = started + budget_s
    steps = max(1, min(episode_steps, 100))
    seeds = [1000 + i for i in range(episodes)]
    jobs: list[tuple[str, Plan]] = []

    def randoms(name: str, options: dict[str, Any] | None = None) -> None:
        for seed in seeds:
            rng = random.Random(f"{name}:{seed}")
            actions = [random_action(action_schema, rng) for _ in range(steps)]
            jobs.append((name, _plan(seed, f"statistical-{name}-{seed}", actions, options)))

    randoms("random")
    for seed in seeds:
        fixed = random_action(action_schema, random.Random(f"constant:{seed}"))
        jobs.append(("constant", _plan(seed, f"statistical-constant-{seed}", [fixed] * steps)))
        empty = empty_action(action_schema, fixed)
        if empty is not None:
            jobs.append(("empty", _plan(seed, f"statistical-empty-{seed}", [empty] * steps)))
    replays = min(episodes, _REPLAYS)
    caps = s.manifest.capabilities if s.manifest is not None else None
    if caps is not None and s.root is not None:
        try:
            if caps.oracle is not None and caps.oracle.form == "script":
                jobs += [("oracle", load_plan(s.root, caps.oracle.location))] * replays
            for i, canary in enumerate(load_canaries(s.root, caps.canaries) if caps.canaries else []):
                name = f"canary {i + 1} ({canary.reset.episode_id})"
                run.canaries.append(name)
                jobs += [(name, canary)] * replays
        except PlanError as exc:
            run.setup_error = str(exc)
        tiers, run.tiers_error = _read_tiers(s.root)
        for tier, options in tiers:
            run.tiers.append(tier)
            randoms(f"tier {tier}", options)
    # Round-robin over the policies, so that a budget running out leaves each some episodes.
    by_policy: dict[str, list[Plan]] = {}
    for name, plan in jobs:
        by_policy.setdefault(name, []).append(plan)
        run.plays.setdefault(name, [])
    order = [
        (name, plans[i])
        for i in range(max(map(len, by_policy.values()), default=0))
        for name, plans in by_policy.items()
        if i < len(plans)
    ]
    gate = asyncio.Semaphore(concurrency)

    async def play_one(name: str, plan: Plan) -> None:
        async with gate:
            left = ends - time.monotonic()
            if left <= 0:
                run.out_of_time = True
                return
            try:  # the budget ends the level: a server that drags out its replies cannot stretch it
                t: Transcript = await asyncio.wait_for(play_plan(s, plan, states=False), timeout=left)
            except TimeoutError:
                run.out_of_time = True
                return
        if t.failure:
            run.failures.setdefault(name, t.failure)
        else:
            run.plays[name].append(t.last_reward())

    await asyncio.gather(*(play_one(name, plan) for name, plan in order))
    run.seconds = round(time.monotonic() - started, 3)
    return run


def _r(check_id: str, status: str, evidence: list[str], remediation: str | None = None, **measured: Any) -> ResultV2:
    return ResultV2(check_id=check_id, status=status, evidence=evidence, remediation=remediation, measured=measured)  # type: ignore[arg-type]


class _Grader:
    """One method a check, named as the check's id after `statistical.`."""

    def __init__(self, run: StatisticalRun, manifest: NormalizedManifest, bounds: Bounds) -> None:
        self.run, self.m, self.bounds = run, manifest, bounds
        self.low, self.high = manifest.reward.range
        self.margin = manifest.reward.floor_margin

    def estimate(self, name: str) -> tuple[Estimate | None, str | None]:
        """The estimate of a policy's rewards, or why there is none (for a `skip` or `fail`)."""
        if name in self.run.failures and not self.run.rewards(name):
            return None, f"every episode of the {name} policy failed: {self.run.failures[name]}"
        got = self.run.rewards(name)
        est = Estimate.of(got)
        if est is None:
            played = len(self.run.plays.get(name, []))
            if played and not got:
                return None, f"the {name} policy's {played} episodes ended without a numeric reward"
            why = (
                f"the statistical budget ({self.run.budget_s:g} s) ran out"
                if self.run.out_of_time
                else f"{self.run.episodes} episodes a policy were asked for"
            )
            return None, f"{len(got)} rewarded episodes of the {name} policy ({why}); {MIN_EPISODES} are needed"
        return est, None

    def need(self, check_id: str, *names: str) -> tuple[list[Estimate], ResultV2 | None]:
        out = []
        for name in names:
            est, why = self.estimate(name)
            if est is None:
                assert why is not None
                return [], _r(check_id, "skip", [why], "raise statistical_budget_s or statistical_episodes")
            out.append(est)
        return out, None

    # -- the seven checks ------------------------------------------------------------------------

    def reward_reachability(self) -> ResultV2:
        cid = "statistical.reward_reachability"
        if "oracle" not in self.run.plays:
            return _r(cid, "skip", [self._no_oracle()])
        replays = self.run.plays["oracle"]
        if len(replays) < MIN_EPISODES:
            return _r(cid, "skip", [self._few_replays(len(replays))])
        top = self.high - self.m.reward.oracle_tolerance
        hits = sum(1 for r in replays if r is not None and r >= top)
        every = [r for p in self.run.plays.values() for r in p if r is not None]
        outside = sorted({r for r in every if r < self.low or r > self.high})
        low, high = _wilson_low(hits, len(replays)), _wilson_high(hits, len(replays))
        status = _decided(low >= 0.5 and not outside, bool(outside) or high < 0.5)
        evidence = [
            f"the oracle reached {top:g} (the range's top less its tolerance) in {hits} of {len(replays)} replays "
            f"(95% interval {low:.2f} to {high:.2f}; at least 0.5 needed)",
            f"{len(outside)} distinct rewards of {len(every)} episodes fell outside [{self.low:g}, {self.high:g}]"
            + (f": {outside[:5]}" if outside else ""),
            *([_UNDECIDED] if status == "skip" else []),
        ]
        fix = "the top reward must be reached reliably, and no reward may leave the declared range"
        return _r(
            cid, status, evidence, None if status == "pass" else fix,
            reached=hits, replays=len(replays), reach_ci95_low=round(low, 4), reach_ci95_high=round(high, 4),
            outside=outside[:20],
        )  # fmt: skip

    def difficulty_separation(self) -> ResultV2:
        cid = "statistical.difficulty_separation"
        if self.run.tiers_error:
            return _r(cid, "fail", [self.run.tiers_error], f"fix {DIFFICULTY_FILE}")
        if not self.run.tiers:
            return _r(
                cid,
                "skip",
                [f"no difficulty tiers are declared ({DIFFICULTY_FILE})"],
                f"name two or more tiers, easiest first, with their reset options, in {DIFFICULTY_FILE}",
            )
        ests, early = self.need(cid, *(f"tier {t}" for t in self.run.tiers))
        if early is not None:
            return early
        named = list(zip(self.run.tiers, ests, strict=True))
        pairs = list(itertools.pairwise(named))
        # not easier, shown: the easier tier's whole interval at or below the harder one's
        wrong = [
            f"tier {a} ({ea.shown()}) is not easier than tier {b} ({eb.shown()})"
            for (a, ea), (b, eb) in pairs
            if ea.high <= eb.low
        ]
        unclear = [
            f"tier {a} ({ea.shown()}) and tier {b} ({eb.shown()}) overlap"
            for (a, ea), (b, eb) in pairs
            if not ea.low > eb.high and not ea.high <= eb.low
        ]
        status = _decided(not wrong and not unclear, bool(wrong))
        shown = [f"tier {t}: random policy {e.shown()}" for t, e in zip(self.run.tiers, ests, strict=True)]
        evidence = {
            "pass": [*shown, "each tier's interval lies above the next one's"],
            "fail": wrong + shown,
            "skip": [*unclear, *shown, _UNDECIDED],
        }[status]
        return _r(
            cid,
            status,
            evidence,
            None
            if status == "pass"
            else "make each tier harder than the one before, or declare the tiers in their real order",
            tiers={t: e.figures() for t, e in zip(self.run.tiers, ests, strict=True)},
        )

    def headroom(self) -> ResultV2:
        cid = "statistical.headroom"
        ests, early = self.need(cid, "random")
        if early is not None:
            return early
        rand = ests[0]
        room = self.high - _HEADROOM * (self.high - self.low)
        status = _decided(rand.high < room, rand.low >= room)
        return _r(
            cid,
            status,
            [
                f"the random policy scores {rand.shown()}; room to learn needs its interval below {room:g} "
                f"(a tenth of the range below its top)",
                *([_UNDECIDED] if status == "skip" else []),
            ],
            None
            if status == "pass"
            else "random play already earns near the top: make the task harder, or the reward sparser",
            random=rand.figures(),
            ceiling=room,
        )

    def variance_bound(self) -> ResultV2:
        cid = "statistical.variance_bound"
        tol = self.m.reward.variance_tolerance
        tol = self.bounds.max_variance_tolerance if tol is None else tol  # static.manifest holds it to the bound
        replays = self.run.rewards("oracle")
        if "oracle" not in self.run.plays:
            return _r(cid, "skip", [self._no_oracle()])
        if len(replays) < MIN_EPISODES:
            return _r(cid, "skip", [self._few_replays(len(replays))])
        var = statistics.variance(replays)
        high = _variance_high(var, len(replays))
        good = var <= tol
        return _r(
            cid,
            "pass" if good else "fail",
            [
                f"the oracle's reward over {len(replays)} replays of the same seed and actions has variance "
                f"{var:.4g} (95% upper bound {high:.4g}); the tolerance is {tol:g}"
            ],
            None if good else "the same play must earn (nearly) the same reward: remove noise from the reward",
            variance=round(var, 6),
            variance_ci95_high=round(high, 6),
            tolerance=tol,
            replays=len(replays),
        )

    def training_signal(self) -> ResultV2:
        cid = "statistical.training_signal"
        ests, early = self.need(cid, "random")
        if early is not None:
            return early
        rand = ests[0]
        oracle = self.run.rewards("oracle")
        distinct = len(set(rand.values))
        target = statistics.fmean(oracle) if oracle else None
        # no signal, shown: one reward for every random episode, or random play that matches the oracle
        status = _decided(
            distinct > 1 and target is not None and rand.high < target,
            distinct == 1 or (target is not None and rand.low >= target),
        )
        evidence = [
            f"the random policy's {rand.n} rewards take {distinct} distinct values, mean {rand.shown()}",
            f"the oracle earns {target:.4g}" if target is not None else self._no_oracle(),
            *([_UNDECIDED] if status == "skip" and target is not None else []),
        ]
        return _r(
            cid,
            status,
            evidence,
            None
            if status == "pass"
            else "a learner starting from random play needs rewards that vary, below what good play earns",
            random=rand.figures(),
            distinct_rewards=distinct,
        )

    def adversarial_floor(self) -> ResultV2:
        cid = "statistical.adversarial_floor"
        if self.run.setup_error:
            return _r(cid, "fail", [self.run.setup_error], "fix the canaries file")
        bad = [*self.run.canaries, *(["empty"] if "empty" in self.run.plays else [])]
        if not bad:
            return _r(
                cid,
                "skip",
                ["no canaries are declared (capabilities.canaries) and the action has no text or nullable field"],
                "declare canaries: plans of deliberately bad play",
            )
        ests, early = self.need(cid, *bad)
        if early is not None:
            return early
        floor = self.low + self.margin
        named = list(zip(bad, ests, strict=True))
        over = [f"{n}: {e.shown()}" for n, e in named if e.low > floor]  # above the floor, shown
        unclear = [f"{n}: {e.shown()}" for n, e in named if e.high > floor >= e.low]
        status = _decided(not over and not unclear, bool(over))
        return _r(
            cid,
            status,
            [
                f"the floor is {floor:g} (the range's bottom plus floor_margin)",
                *(over or unclear or [f"{n}: {e.shown()}" for n, e in named]),
                *([_UNDECIDED] if status == "skip" else []),
            ],
            None if status == "pass" else "bad play is rewarded above the floor: check the reward function",
            floor=floor,
            policies={n: e.figures() for n, e in named},
        )

    def gameability_gap(self) -> ResultV2:
        cid = "statistical.gameability_gap"
        oracle = self.run.rewards("oracle")
        if not oracle:
            return _r(cid, "skip", [self._no_oracle()])
        cheap = [n for n in ("constant", "empty") if n in self.run.plays]
        ests, early = self.need(cid, *cheap)
        if early is not None:
            return early
        named = list(zip(cheap, ests, strict=True))
        best_name, best = max(named, key=lambda p: p[1].mean)
        target = statistics.fmean(oracle)
        gap = target - best.mean
        good = gap >= self.margin
        return _r(
            cid,
            "pass" if good else "fail",
            [
                f"the oracle earns {target:.4g}; the best cheap strategy, {best_name}, {best.shown()}: "
                f"a gap of {gap:.4g} (floor_margin {self.margin:g})"
            ],
            None if good else f"the {best_name} strategy earns too close to the oracle: the reward can be gamed",
            gap=round(gap, 6),
            best_cheap=best_name,
            cheap={n: e.figures() for n, e in named},
        )

    def _few_replays(self, n: int) -> str:
        return f"{n} rewarded replays of the oracle ({self._no_oracle()}); {MIN_EPISODES} are needed"

    def _no_oracle(self) -> str:
        if self.run.setup_error:
            return f"the oracle or canaries could not be read: {self.run.setup_error}"
        if "oracle" not in self.run.plays:
            return "no oracle plan is declared (capabilities.oracle, form script)"
        if "oracle" in self.run.failures:
            return f"the oracle's replays failed: {self.run.failures['oracle']}"
        if self.run.out_of_time:
            return f"the statistical budget ({self.run.budget_s:g} s) ran out before the oracle was replayed"
        return "the oracle's replays ended without a numeric reward"


def statistical_results(run: StatisticalRun, manifest: NormalizedManifest | None, bounds: Bounds) -> list[ResultV2]:
    """The seven checks' results from `run`, in the policy's order (each `skip`s with the reason
    when it cannot decide)."""
    from openenv.validation.rfc008 import Level, load_policy

    ids = [i for i, e in load_policy().entries.items() if e.level == Level.STATISTICAL]
    if manifest is None:
        return [_r(i, "skip", ["unmet dependency: static.manifest"]) for i in ids]
    out = []
    for check_id in ids:
        result = getattr(_Grader(run, manifest, bounds), check_id.removeprefix("statistical."))()
        result.measured.setdefault("seconds_all_policies", run.seconds)
        out.append(result)
    return out
