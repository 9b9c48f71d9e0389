"""Yardsticks for a blackjack policy: basic strategy, the naive baselines, and honest statistics.

Basic strategy here is the best hit-or-stand decision for `envs/blackjack_env`'s default rules
(infinite deck, the dealer stands on all 17s, a natural pays 3:2, the dealer's natural beats
any other hand), worked out exactly by dynamic programming over the card probabilities, not
copied from a chart: no doubling or splitting exists in this game, so the usual charts do not
apply as they are. `expected_return` gives each policy's exact value under those rules.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

# Card values with the ace as 1: 2-9 once each, 10 four times (10, J, Q, K) in 13 ranks.
_P = {v: (4 if v == 10 else 1) / 13 for v in range(1, 11)}
_BUST = 22
_NATURAL = "natural"

# A decision sees (player's total, whether an ace counts 11 in it, the dealer's up card 1-10).
Decision = Callable[[int, bool, int], str]


def _best(hard: int, ace: bool) -> int:
    return hard + 10 if ace and hard + 10 <= 21 else hard


@cache
def _dealer(hard: int, ace: bool, cards: int) -> tuple[tuple[Any, float], ...]:
    """Distribution of the dealer's final total (22 = bust, 'natural') from a partial hand."""
    total = _best(hard, ace)
    if total >= 17:
        return (((_NATURAL if cards == 2 and total == 21 else min(total, _BUST)), 1.0),)
    out: dict[Any, float] = {}
    for value, p in _P.items():
        for final, q in _dealer(hard + value, ace or value == 1, cards + 1):
            out[final] = out.get(final, 0.0) + p * q
    return tuple(out.items())


@cache
def _stand(total: int, up: int, natural: bool = False) -> float:
    value = 0.0
    for final, q in _dealer(up, up == 1, 1):
        if final == _NATURAL:
            value += q * (0.0 if natural else -1.0)
        elif natural:
            value += q * 1.5
        elif final == _BUST or total > final:
            value += q
        elif total < final:
            value -= q
    return value


@cache
def _optimal(hard: int, ace: bool, up: int) -> float:
    return max(_stand(_best(hard, ace), up), _hit(hard, ace, up, _optimal))


def _hit(hard: int, ace: bool, up: int, after: Callable[[int, bool, int], float]) -> float:
    return sum(p * (-1.0 if hard + v > 21 else after(hard + v, ace or v == 1, up)) for v, p in _P.items())


def _hard_of(total: int, soft: bool) -> int:
    return total - 10 if soft else total


def basic_strategy(total: int, soft: bool, up: int) -> str:
    """The decision with the higher expected return (ties stand)."""
    hard = _hard_of(total, soft)
    return "hit" if _hit(hard, soft, up, _optimal) > _stand(total, up) + 1e-12 else "stand"


def always_stand(total: int, soft: bool, up: int) -> str:
    return "stand"


def expected_return(decide: Decision) -> float:
    """The exact mean reward per hand of a deterministic policy under the default rules."""

    @cache
    def value(hard: int, ace: bool, up: int) -> float:
        total = _best(hard, ace)
        if decide(total, ace and hard + 10 <= 21, up) == "stand":
            return _stand(total, up)
        return _hit(hard, ace, up, value)

    mean = 0.0
    for a, pa in _P.items():
        for b, pb in _P.items():
            for up, pu in _P.items():
                hard, ace = a + b, a == 1 or b == 1
                weight = pa * pb * pu
                if _best(hard, ace) == 21:  # a natural stands (the env tells the player to)
                    mean += weight * _stand(21, up, natural=True)
                else:
                    mean += weight * value(hard, ace, up)
    return mean


# -- reading the env's observations --------------------------------------------------------------------


def up_card(observation: dict[str, Any]) -> int:
    """The dealer's visible card as a value 1-10 (the ace is 1)."""
    rank = str(observation["dealer_cards"][0])[:-1]
    return 1 if rank == "A" else 10 if rank in ("J", "Q", "K") else int(rank)


def decision_text(observation: dict[str, Any], record: Any = None) -> str:
    """What the model reads each turn: the few facts a decision depends on, one token each."""
    if observation.get("done"):
        return str(observation.get("text", ""))
    up = up_card(observation)
    soft = "soft" if observation.get("usable_ace") else "hard"
    return f"dealer {'A' if up == 1 else up} {soft} total {observation['player_total']}"


def rule_policy(decide: Decision) -> Callable[[Any], dict[str, str]]:
    """A `RolloutEngine` policy playing `decide` on the env's observation."""

    def policy(inp: Any) -> dict[str, str]:
        obs = inp.observation
        return {"action": decide(int(obs["player_total"]), bool(obs["usable_ace"]), up_card(obs))}

    return policy


def random_policy(inp: Any) -> dict[str, str]:
    """Hit or stand with equal odds; reproducible per (seed, turn)."""
    return {"action": random.Random(f"{inp.seed}:{inp.turn}").choice(("hit", "stand"))}


# -- statistics ------------------------------------------------------------------------------------------


def mean_ci(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its normal-approximation 95% confidence interval."""
    n = len(values)
    if n < 2:
        raise ValueError("a confidence interval needs at least two values")
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_ci(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Mean of a - b over the same hands (same seeds) and its 95% interval."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    return mean_ci([x - y for x, y in zip(a, b, strict=True)])
