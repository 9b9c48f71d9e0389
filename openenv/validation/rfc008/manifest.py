"""The normalized manifest of RFC 008: what `openenv.yaml`'s `validation:` block declares, read strictly.

Every check of the RFC 008 levels reads this one document. It is built from the YAML alone (the
package's code is never imported for it); `name` and `version` come from the manifest's top
level, the rest from its `validation:` block. Keys of the block that RFC 008 does not define
(`stochastic`, `varying_fields`: ours, see openenv/declared.py) are left out, as upstream's parser
leaves them. Schema 1 has no `execution`; a block with `execution` is schema 2.

`openenv.declared` reads the same block leniently for the Hub's grants; the tolerances' bounds
are the severity policy's (`policy.Bounds`), in both.
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "BLOCK_REMEDIATION",
    "Capabilities",
    "Execution",
    "ManifestBlockError",
    "NetworkDeclaration",
    "NormalizedManifest",
    "NormalizedManifestV2",
    "OracleDeclaration",
    "ResourceDeclaration",
    "RewardDeclaration",
    "normalize",
]

SIGNATURE = "openenv.yaml"

BLOCK_REMEDIATION = (
    "add a `validation:` block to openenv.yaml with reward (range, oracle_tolerance, floor_margin), resources "
    "(cpu, memory_mb, disk_mb, episode_timeout_s), capabilities (verifier: {kind: reward_channel}, oracle, "
    "canaries) and types (tags); `openenv init` writes one, docs/validate.md describes every key"
)
FIX_REMEDIATION = "fix the keys named above in openenv.yaml's `validation:` block (docs/validate.md lists them)"


class ManifestBlockError(Exception):
    """The `validation:` block is missing or does not follow the schema; `errors` says where."""

    def __init__(self, errors: list[str], remediation: str = FIX_REMEDIATION) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.remediation = remediation


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RewardDeclaration(_Block):
    range: tuple[float, float] = (0.0, 1.0)
    oracle_tolerance: float = Field(default=0.0, ge=0.0)
    floor_margin: float = Field(ge=0.0)
    variance_tolerance: float | None = Field(default=None, ge=0.0)

    @model_validator(mode="after")
    def _increasing(self) -> RewardDeclaration:
        low, high = self.range
        if not low < high:
            raise ValueError(f"reward range must go from low to high, got {list(self.range)}")
        return self


class JudgePin(_Block):
    model: str
    version: str
    params: dict[str, Any] = Field(default_factory=dict)


class OracleDeclaration(_Block):
    form: Literal["injected_state", "script"]
    location: str


class VerifierBinding(_Block):
    kind: Literal["reward_channel", "script"]
    entry: str | None = None

    @model_validator(mode="after")
    def _entry_for_scripts_only(self) -> VerifierBinding:
        if (self.kind == "script") != (self.entry is not None):
            raise ValueError("verifier.entry is required for kind 'script' and not allowed for 'reward_channel'")
        return self


class ResourceDeclaration(_Block):
    cpu: float = Field(gt=0.0)
    memory_mb: int = Field(gt=0)
    disk_mb: int = Field(gt=0)
    episode_timeout_s: float = Field(gt=0.0)
    gpus: int = Field(default=0, ge=0)
    gpu_types: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _types_need_gpus(self) -> ResourceDeclaration:
        if self.gpu_types and not self.gpus:
            raise ValueError("gpu_types are given but gpus is 0")
        return self


class NetworkDeclaration(_Block):
    mode: Literal["public", "no-network", "allowlist"] = "public"
    allowed_hosts: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _hosts_for_allowlists(self) -> NetworkDeclaration:
        if (self.mode == "allowlist") != bool(self.allowed_hosts):
            raise ValueError("allowed_hosts go with mode 'allowlist', and an allowlist needs at least one")
        return self


class TaskDistributionPin(_Block):
    generator_seed: int | None = None
    dataset_version: str | None = None
    generator_model: str | None = None

    def pinned(self) -> bool:
        return any(v is not None for v in (self.generator_seed, self.dataset_version, self.generator_model))


class Capabilities(_Block):
    oracle: OracleDeclaration | None = None
    verifier: VerifierBinding
    set_state: bool = False
    llm_judged: bool = False
    rubric_tree: bool = False
    task_api: bool = False
    canaries: str | None = None
    declared_tools: list[str] = Field(default_factory=list)
    declared_task_count: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _injected_state_needs_set_state(self) -> Capabilities:
        if self.oracle is not None and self.oracle.form == "injected_state" and not self.set_state:
            raise ValueError("oracle.form 'injected_state' needs set_state: true (or use form 'script')")
        return self


class TypeTags(_Block):
    tags: list[str] = Field(min_length=1)

    @field_validator("tags")
    @classmethod
    def _no_empty_tag(cls, tags: list[str]) -> list[str]:
        if any(not t for t in tags):
            raise ValueError("a tag may not be empty")
        return tags


class NormalizedManifest(_Block):
    manifest_schema_version: Literal["1"]
    name: str
    version: str | None = None
    signature: Literal["openenv.yaml"]
    reward: RewardDeclaration
    judge: JudgePin | None = None
    resources: ResourceDeclaration
    task_distribution: TaskDistributionPin | None = None
    network: NetworkDeclaration = Field(default_factory=NetworkDeclaration)
    capabilities: Capabilities
    types: TypeTags

    @model_validator(mode="after")
    def _judge_pin_with_llm_judges(self) -> NormalizedManifest:
        if self.capabilities.llm_judged and (self.judge is None or self.reward.variance_tolerance is None):
            raise ValueError("capabilities.llm_judged needs a judge pin and reward.variance_tolerance")
        if not self.capabilities.llm_judged and self.judge is not None:
            raise ValueError("a judge pin is given but capabilities.llm_judged is false")
        return self


def _package_relative(value: str) -> str:
    path = PurePosixPath(value)
    if not value or any(c in value for c in "\\:\x00") or path.is_absolute() or ".." in path.parts:
        raise ValueError("must be a path inside the package, without '..'")
    return value


class Execution(_Block):
    """How a runtime validator builds and drives the env (schema 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["openenv_ws"] = "openenv_ws"
    probe_path: str = "validation/runtime.json"
    dockerfile: str = "Dockerfile"
    context: str = "."
    agent_boundary: Literal["api"] = "api"
    requires_credentials: bool = Field(default=False, strict=True)

    @field_validator("probe_path", "dockerfile", "context")
    @classmethod
    def _inside(cls, value: str) -> str:
        return _package_relative(value)

    @field_validator("probe_path", "dockerfile")
    @classmethod
    def _a_file(cls, value: str) -> str:
        if PurePosixPath(value) == PurePosixPath("."):
            raise ValueError("must name a file")
        return value


class NormalizedManifestV2(NormalizedManifest):
    manifest_schema_version: Literal["2"]  # type: ignore[assignment]
    execution: Execution

    @model_validator(mode="after")
    def _finite(self) -> NormalizedManifestV2:
        pending: list[Any] = [self.model_dump()]
        while pending:
            value = pending.pop()
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError("numbers in a schema 2 block must be finite")
            if isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, (list, tuple)):
                pending.extend(value)
        return self


_SECTIONS = ("reward", "resources", "capabilities", "types", "network")


def normalize(data: Any) -> NormalizedManifest:
    """The normalized manifest of a parsed `openenv.yaml` (a schema 2 one when the block has `execution`).

    Raises:
        ManifestBlockError: the data is not a mapping, has no `validation:` block, or the block
            does not follow the schema (every problem listed, each with its key path).
    """
    if not isinstance(data, dict):
        raise ManifestBlockError(["openenv.yaml is not a YAML mapping"])
    block = data.get("validation")
    if block is None:
        raise ManifestBlockError(["openenv.yaml has no `validation:` block"], BLOCK_REMEDIATION)
    if not isinstance(block, dict):
        raise ManifestBlockError(["`validation:` must be a mapping"], BLOCK_REMEDIATION)
    schema_2 = "execution" in block
    fields: dict[str, Any] = {
        "manifest_schema_version": "2" if schema_2 else "1",
        "signature": SIGNATURE,
        "version": data.get("version"),
        "judge": block.get("judge"),
        "task_distribution": block.get("task_distribution"),
    }
    if data.get("name") is not None:
        fields["name"] = data["name"]
    fields.update({k: block[k] for k in _SECTIONS if block.get(k) is not None})
    if schema_2:
        fields["execution"] = block["execution"]
    model: type[NormalizedManifest] = NormalizedManifestV2 if schema_2 else NormalizedManifest
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise ManifestBlockError(
            [f"{'.'.join(str(p) for p in e['loc']) or 'validation'}: {e['msg']}" for e in exc.errors()]
        ) from None
