"""What an environment declares about itself in `openenv.yaml`'s `validation:` block (the block
upstream OpenEnv 0.10.0's template writes): its reward range, the resources it needs, the network
it expects, and whether its outcomes are random by design (`stochastic: true`). Read leniently: a
block is optional, keys this SDK does not model (`capabilities`, `types`, `judge`,
`task_distribution`, `execution`) are kept as written, and every problem comes back as a message
rather than an exception, for the validator to report.

The Hub grants the declared resources up to its own caps, checks the declared reward range against
the rewards its smoke test sees, and grants a network only as far as its sandbox allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["POLICY_BOUNDS", "Declared", "NetworkDecl", "ResourcesDecl", "RewardDecl", "read_declared"]

# Bounds upstream's validator enforces on the block (its "severity" policy): beyond them, a warning here.
POLICY_BOUNDS = {"oracle_tolerance": 0.1, "floor_margin": 0.1, "variance_tolerance": 0.2, "episode_timeout_s": 3600.0}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RewardDecl(_Strict):
    range: tuple[float, float] = (0.0, 1.0)
    oracle_tolerance: float = Field(default=0.0, ge=0)
    floor_margin: float | None = Field(default=None, ge=0)
    variance_tolerance: float | None = Field(default=None, ge=0)

    @field_validator("range")
    @classmethod
    def _increasing(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError("must be two finite numbers, the low one first, e.g. [0.0, 1.0]")
        return value


class ResourcesDecl(_Strict):
    cpu: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=1024, gt=0)
    disk_mb: int = Field(default=512, gt=0)
    episode_timeout_s: float = Field(default=60.0, gt=0)
    gpus: int = Field(default=0, ge=0)
    gpu_types: list[str] = Field(default_factory=list)


class NetworkDecl(_Strict):
    mode: Literal["public", "no-network", "allowlist"] = "public"
    allowed_hosts: list[str] = Field(default_factory=list)


@dataclass(slots=True)
class Declared:
    """The block as read: each modelled part (None when absent or invalid), the rest as written,
    and the problems found, each `(key path, message)`."""

    reward: RewardDecl | None = None
    resources: ResourcesDecl | None = None
    network: NetworkDecl | None = None
    other: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    present: bool = False
    stochastic: bool = False  # outcomes vary by design, even under the same seed: never flagged as nondeterministic
    # Outcome fields that vary from run to run by design (a wall-clock duration, a timestamp), as
    # dotted paths such as "observation.duration_s": the determinism check leaves them out.
    varying_fields: list[str] = field(default_factory=list)

    def reward_outside(self, rewards: list[float]) -> list[float]:
        """The rewards (of a run) outside the declared range, when one is declared."""
        if self.reward is None:
            return []
        low, high = self.reward.range
        return [r for r in rewards if isinstance(r, (int, float)) and not low <= r <= high]


_MODELS: dict[str, type[_Strict]] = {"reward": RewardDecl, "resources": ResourcesDecl, "network": NetworkDecl}


def read_declared(manifest_data: dict[str, Any] | None) -> Declared:
    """Read the `validation:` block of a manifest's data (the parsed YAML mapping)."""
    block = (manifest_data or {}).get("validation")
    if block is None:
        return Declared()
    out = Declared(present=True)
    if not isinstance(block, dict):
        out.problems.append(
            ("validation", "must be a mapping of blocks (reward, resources, capabilities, types, network, ...)")
        )
        return out
    for key, value in block.items():
        if key == "stochastic":
            if isinstance(value, bool):
                out.stochastic = value
            else:
                out.problems.append(("validation.stochastic", "must be true or false"))
            continue
        if key == "varying_fields":
            if (
                isinstance(value, list)
                and len(value) <= 50
                and all(
                    isinstance(v, str) and v.strip().startswith("observation.") and len(v.strip()) > 12 for v in value
                )
            ):
                out.varying_fields = [v.strip() for v in value]
            else:
                out.problems.append(
                    (
                        "validation.varying_fields",
                        "must be a list (at most 50) of observation field paths such as observation.duration_s",
                    )
                )
            continue
        model = _MODELS.get(key)
        if model is None:
            out.other[key] = value
            continue
        try:
            setattr(out, key, model.model_validate(value if value is not None else {}))
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                where = ".".join(str(p) for p in ("validation", key, *err["loc"]))
                out.problems.append((where, err["msg"]))
    if out.network is not None:
        if out.network.mode == "allowlist" and not out.network.allowed_hosts:
            out.problems.append(("validation.network.allowed_hosts", "an allowlist needs the hosts it allows"))
        if out.network.mode != "allowlist" and out.network.allowed_hosts:
            out.problems.append(
                ("validation.network.allowed_hosts", f"only an allowlist names hosts (mode is {out.network.mode})")
            )
    if out.resources is not None and out.resources.gpu_types and not out.resources.gpus:
        out.problems.append(("validation.resources.gpu_types", "gpu types are given but gpus is 0"))
    for key, bound in POLICY_BOUNDS.items():
        part = out.resources if key == "episode_timeout_s" else out.reward
        value = getattr(part, key, None) if part is not None else None
        if value is None:
            continue
        beyond = value < bound if key == "floor_margin" else value > bound
        if beyond:
            side = "at least" if key == "floor_margin" else "at most"
            out.problems.append(
                (
                    f"validation.{'resources' if key == 'episode_timeout_s' else 'reward'}.{key}",
                    f"{value:g} is beyond what validators accept ({side} {bound:g})",
                )
            )
    return out
