"""RFC 008's severity policies: every check id, its level, its lane and how much a failure weighs.

Upstream OpenEnv 0.10.0 fixed the check ids of validation in versioned policies (`v1`, `v2`). A
check's code says only whether it held (`pass`, `fail`, `skip`, `error`); the policy alone turns
results into a verdict, so a local run pinned to a policy reproduces the Hub's verdict for every
check of the local lane. The tables below are the contract; `tests/validation/test_rfc008.py`
holds them equal to the policy files in upstream's own package.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from openenv.errors import OpenEnvError

__all__ = [
    "DEFAULT_POLICY",
    "LEVEL_NAMES",
    "POLICY_VERSIONS",
    "Bounds",
    "Lane",
    "Level",
    "Policy",
    "PolicyEntry",
    "PolicyError",
    "PolicySeverity",
    "ResultStatus",
    "Verdict",
    "load_policy",
    "parse_level",
]

Lane = Literal["local", "hub"]
PolicySeverity = Literal["fail", "warn", "advisory"]
ResultStatus = Literal["pass", "fail", "skip", "error"]
Verdict = Literal["pass", "warn", "fail"]


class Level(IntEnum):
    """Validation levels, cheapest first; a run covers every level up to the one asked for."""

    STATIC = 1
    RUNTIME = 2
    SEMANTIC = 3
    STATISTICAL = 4


# The names `--level` takes (statistical checks run only in the Hub's lane).
LEVEL_NAMES: dict[str, Level] = {"static": Level.STATIC, "runtime": Level.RUNTIME, "semantic": Level.SEMANTIC}


class PolicyError(OpenEnvError):
    """An unknown policy or level, or a result the policy does not know (exit code 3, as upstream)."""


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    check_id: str
    level: Level
    lane: Lane
    severity: PolicySeverity


@dataclass(frozen=True, slots=True)
class Bounds:
    """The most an author may declare: tolerances are capped so no manifest can wave its own checks through."""

    max_oracle_tolerance: float = 0.1
    min_floor_margin: float = 0.1
    max_variance_tolerance: float = 0.2
    max_episode_timeout_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class Policy:
    version: str
    entries: dict[str, PolicyEntry]
    bounds: Bounds

    def lane(self, lane: Lane) -> dict[str, PolicyEntry]:
        """The entries a run of `lane` reports: the local lane's alone, or all of them for the hub lane."""
        return {k: e for k, e in self.entries.items() if lane == "hub" or e.lane == "local"}

    def verdict(self, results: Iterable[tuple[str, ResultStatus]], lane: Lane) -> Verdict:
        """The run's verdict from `(check_id, status)` pairs: an error, or a failure of a `fail`
        check, fails it; a skip or a failure of a lighter check makes it `warn`.

        Raises:
            PolicyError: a result's id is not in this policy's `lane`.
        """
        entries = self.lane(lane)
        verdict: Verdict = "pass"
        for check_id, status in results:
            entry = entries.get(check_id)
            if entry is None:
                raise PolicyError(f"check id {check_id!r} is not in policy {self.version!r} for the {lane} lane")
            if status == "error" or (status == "fail" and entry.severity == "fail"):
                return "fail"
            if status in ("fail", "skip"):
                verdict = "warn"
        return verdict


_L: Lane = "local"
_H: Lane = "hub"
_S, _R, _M, _T = Level.STATIC, Level.RUNTIME, Level.SEMANTIC, Level.STATISTICAL

# (check id, level, lane, severity) in the order reports list them.
_V2: tuple[tuple[str, Level, Lane, PolicySeverity], ...] = (
    ("static.manifest", _S, _L, "fail"),
    ("static.reproducible_build", _S, _L, "fail"),
    ("static.image_hygiene", _S, _L, "warn"),
    ("static.layout", _S, _L, "warn"),
    ("static.sbom", _S, _L, "fail"),
    ("static.oci_labels", _S, _L, "fail"),
    ("static.resource_declaration", _S, _L, "fail"),
    ("static.timeout_ceiling", _S, _L, "fail"),
    ("static.dependency_pinning", _S, _L, "fail"),
    ("static.task_distribution_pinning", _S, _L, "fail"),
    ("runtime.startup", _R, _L, "fail"),
    ("runtime.reward_well_formed", _R, _L, "fail"),
    ("runtime.rubric_introspectable", _R, _L, "warn"),
    ("runtime.observation_schema", _R, _L, "fail"),
    ("runtime.state_contract", _R, _L, "fail"),
    ("runtime.trajectory_record", _R, _L, "warn"),
    ("runtime.reward_attribution", _R, _L, "warn"),
    ("runtime.tool_declaration_accuracy", _R, _L, "fail"),
    ("runtime.task_declaration_accuracy", _R, _L, "fail"),
    ("runtime.seed_control", _R, _L, "fail"),
    ("runtime.episode_determinism", _R, _L, "fail"),
    ("runtime.network_policy", _R, _L, "fail"),
    ("runtime.host_containment", _R, _L, "fail"),
    ("runtime.resource_bounds", _R, _L, "fail"),
    ("runtime.episode_isolation", _R, _L, "fail"),
    ("runtime.oracle_containment", _R, _L, "fail"),
    ("semantic.oracle_max", _M, _L, "fail"),
    ("semantic.floor_gap", _M, _L, "fail"),
    ("semantic.canary_floor", _M, _L, "fail"),
    ("semantic.no_solution_leakage", _M, _L, "fail"),
    ("semantic.verifier_determinism", _M, _L, "fail"),
    ("semantic.verifier_portability", _M, _L, "fail"),
    ("semantic.resource_envelope", _M, _L, "fail"),
    ("semantic.replayability", _M, _L, "fail"),
    ("hub.layer_isolation", _S, _H, "warn"),
    ("hub.time_to_first_work", _R, _H, "warn"),
    ("hub.cosign_signature", _S, _H, "warn"),
    ("hub.cross_host_determinism", _R, _H, "fail"),
    ("hub.immutable_versioning", _S, _H, "fail"),
    ("statistical.reward_reachability", _T, _H, "fail"),
    ("statistical.difficulty_separation", _T, _H, "fail"),
    ("statistical.headroom", _T, _H, "warn"),
    ("statistical.variance_bound", _T, _H, "fail"),
    ("statistical.training_signal", _T, _H, "advisory"),
    ("statistical.adversarial_floor", _T, _H, "fail"),
    ("statistical.gameability_gap", _T, _H, "warn"),
)


def _policy(version: str, rows: Iterable[tuple[str, Level, Lane, PolicySeverity]]) -> Policy:
    return Policy(version, {r[0]: PolicyEntry(*r) for r in rows}, Bounds())


# v1 is v2 without runtime.startup: it covers the static level only.
_POLICIES: dict[str, Policy] = {
    "v1": _policy("v1", (r for r in _V2 if r[0] != "runtime.startup")),
    "v2": _policy("v2", _V2),
}
POLICY_VERSIONS = tuple(_POLICIES)
DEFAULT_POLICY = "v2"


def load_policy(version: str | None = None) -> Policy:
    """The policy `version` ("v1" or "v2"; None: the default, v2).

    Raises:
        PolicyError: no such policy.
    """
    version = version or DEFAULT_POLICY
    try:
        return _POLICIES[version]
    except KeyError:
        raise PolicyError(
            f"no severity policy {version!r}: use one of {', '.join(POLICY_VERSIONS)} (--policy v2)"
        ) from None


def parse_level(name: str) -> Level:
    """`--level`'s value as a Level.

    Raises:
        PolicyError: not one of static, runtime, semantic.
    """
    try:
        return LEVEL_NAMES[name]
    except KeyError:
        raise PolicyError(f"unknown level {name!r}: use one of {', '.join(LEVEL_NAMES)}") from None
