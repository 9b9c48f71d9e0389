"""Shapes of the catalog API's replies (`/api/v1/envs...`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["EnvDetail", "EnvPage", "EnvSummary", "ResolveRecord", "StageSummary", "VersionDetail", "VersionSummary"]


class EnvSummary(BaseModel):
    id: str = Field(description="owner/name")
    owner: str
    name: str
    source: str
    title: str | None = None
    description: str | None = None
    tags: list[str] = []
    likes: int = 0
    status: str = Field(
        description=(
            "pending | waiting | passing | failing: the latest main version's verdict; before one, waiting means that its run "
            "waits for the infrastructure (engine, registry, source), not on the env"
        )
    )
    stage: str | None = Field(default=None, description="Runtime stage reported by the source (RUNNING, SLEEPING, ...)")
    sha: str | None = None
    url: str | None = Field(default=None, description="Where the Space runs, from the Hub's own subdomain")
    cold_start_s: float | None = None
    step_p50_ms: float | None = None
    badges: list[str] = Field(
        default=[],
        description=(
            "Trust badges of the current passing revision: deterministic (same seed, same trajectory), reward_checked "
            "(rewards within the declared range, not constant, not won by a random policy), forkable (a snapshot restored "
            "twice and forked gave the same future), capacity (a capacity card exists)"
        ),
    )
    checks_passed: list[str] = Field(
        default=[],
        description=(
            "RFC 008 check ids the current revision passed, among those the Hub shows as badges (docs/hub-api.md, "
            "Trust signals); the `check` filter takes any id"
        ),
    )
    deterministic: bool | None = Field(
        default=None,
        description=(
            "true: the same seed gave the same trajectory twice; false: it did not, or the env declares itself stochastic; "
            "null: not checked"
        ),
    )
    reward_checked: bool | None = Field(
        default=None, description="true: the reward sanity check passed; false: it flagged something; null: not checked"
    )
    sessions_held: int | None = Field(
        default=None, description="Concurrent sessions one server held in the smoke stage's ramp; null: not measured"
    )
    updated_at: dt.datetime
    gone: bool = False
    health: str | None = Field(
        default=None, description="running, sleeping, building, error, stopped, unknown (from the health polls)"
    )
    deprecated: bool = False
    successor: str | None = Field(default=None, description="The env to use instead, when deprecated")


class EnvPage(BaseModel):
    items: list[EnvSummary]
    next_cursor: str | None = None
    total: int = Field(description="How many environments match the filters")


class VersionSummary(BaseModel):
    sha: str
    ref: str
    state: str
    validation_status: str | None = None
    build_status: str | None = None
    smoke_status: str | None = None
    cold_start_s: float | None = None
    step_p50_ms: float | None = None
    step_p95_ms: float | None = None
    failure_stage: str | None = None
    failure_reason: str | None = None
    failure_code: str | None = Field(
        default=None,
        description=(
            "Set when the revision failed because it waited for the infrastructure past the Hub's caps: the wait code "
            "(no_engine, engine_lost, base_image, network, source, registry or other) of its last wait"
        ),
    )
    waiting_code: str | None = Field(
        default=None,
        description=(
            "While the run waits for the infrastructure (state waiting, or running again after it): no_engine, engine_lost, "
            "base_image, network, source or other"
        ),
    )
    waiting_reason: str | None = None
    waiting_since: dt.datetime | None = None
    yanked: bool = False
    yank_reason: str | None = None
    created_at: dt.datetime
    finished_at: dt.datetime | None = None


class StageSummary(BaseModel):
    stage: str
    status: str
    attempt: int
    seconds: float | None = None
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    log_url: str


_CAPACITY = (
    'The capacity card (docs/hub-api.md, "Trust signals"): cold start, step latency, memory per session, '
    "sessions one server held, how long it took to free a closed session's place (release_s, measured apart) "
    "and why the ramp stopped; null: not measured"
)
_DETERMINISM = (
    "Same seed twice: verdict deterministic | nondeterministic | stochastic | unchecked, and the first difference"
)
_REWARD_CHECK = (
    "Reward sanity check: verdict ok | flagged | inconclusive | unchecked, the observed range, its flags "
    "(or an inconclusive check's notes) in plain words, and the random baseline of legal actions (none for "
    "free-form actions: no_baseline)"
)


class VersionDetail(VersionSummary):
    capacity: dict[str, Any] | None = Field(default=None, description=_CAPACITY)
    determinism: dict[str, Any] | None = Field(default=None, description=_DETERMINISM)
    reward_check: dict[str, Any] | None = Field(default=None, description=_REWARD_CHECK)
    builder: str | None = None
    image_ref: str | None = None
    registry_ref: str | None = Field(default=None, description="The tag the publish stage pushed to the registry")
    image_digest: str | None = Field(default=None, description="The digest the registry gave the pushed image")
    build_seconds: float | None = None
    validation: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    stages: list[StageSummary] = []


class EnvDetail(EnvSummary):
    deprecation_reason: str | None = None
    capacity: dict[str, Any] | None = Field(default=None, description="The current revision's capacity card")
    determinism: dict[str, Any] | None = Field(default=None, description="The current revision's determinism check")
    reward_check: dict[str, Any] | None = Field(default=None, description="The current revision's reward sanity check")
    readme: str | None = None
    manifest: dict[str, Any] | None = None
    imported_from: dict[str, str | None] | None = Field(
        default=None,
        description=(
            "For an env written by `openenv import`: where it came from, read from the latest revision's manifest "
            "(`imported_from:` block): kind (gymnasium | verifiers | ors), name there, version of its package, and "
            "label (the ecosystem's name); null for any other env"
        ),
    )
    discovery: dict[str, Any] | None = Field(
        default=None,
        description=(
            "What the revision's discovery.json, README and pyproject.toml declare (description, tags, "
            "representative_queries, license, agent_tools, ...) and `warnings` naming each malformed field"
        ),
    )
    validation_parts: dict[str, Any] = Field(
        default_factory=dict,
        description="The manifest's validation: capabilities, types and task_distribution (filter: capability=, task=)",
    )
    versions: list[VersionSummary] = []
    usage: dict[str, str] = Field(default_factory=dict, description="Snippets: how to use this environment")


class ResolveRecord(BaseModel):
    """What a client needs to connect to an environment (see docs/hub-api.md)."""

    repo_id: str
    revision: str | None = Field(description="The pinned sha")
    status: str
    stage: str | None = None
    url: str | None = Field(default=None, description="Base URL of the running Space, when it runs")
    image: str | None = Field(
        default=None,
        description=(
            "Container image reference: `<registry>/<owner>/<name>@sha256:...` when the Hub pushed the tested image to its "
            "registry, else the Space's registry image or one the Hub built (only on the Hub's own engine)"
        ),
    )
    image_digest: str | None = Field(
        default=None,
        description="The pushed image's digest (`sha256:...`), as the registry reported it; pull by it and check it",
    )
    image_tag: str | None = Field(
        default=None, description="The pushed image's human tag, `<registry>/<owner>/<name>:<sha>` (may be moved)"
    )
    port: int = Field(
        default=8000,
        description="The port the env's server listens on inside the image (manifest `port`, else README `app_port`)",
    )
    source: str
    local: dict[str, Any] = Field(
        default_factory=dict,
        description="How to run it locally: `container` and `python` commands (`docker`: a deprecated copy of `container`)",
    )
    yanked: bool = False
    deprecated: bool = False
    successor: str | None = Field(default=None, description="The env to use instead, when deprecated")
    deprecation_reason: str | None = None
    capacity: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The revision's capacity card, to size a pool: sessions_held is how many concurrent sessions one server held"
        ),
    )
    signature: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The pushed image's cosign signature (format, tag, base64 payload, base64 signature, key_id), checked by the "
            "Hub against its key (GET /api/v1/signing-key) before this record was written: `verified` is true"
        ),
    )
    lock_expires_at: dt.datetime | None = Field(
        default=None,
        description=(
            "When resolved through a registered lock file (`?lock=ID`): until when the Hub now keeps its images; null "
            "otherwise, or when this Hub does not hold that lock"
        ),
    )
