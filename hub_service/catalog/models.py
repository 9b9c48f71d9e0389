"""Catalog tables: environments and their revisions (versions)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from hub_service.catalog.states import BuilderKind, EnvStatus, SourceKind, VersionState
from hub_service.db import Base, utcnow
from hub_service.vocabularies import closed_vocabulary

__all__ = ["STATUSES", "VERSION_STATES", "EnvRecord", "EnvVersion"]

# An environment's status is its latest main-branch version's verdict; before it has one, "waiting"
# says that its run waits for the infrastructure (engine, registry, source), not on the env.
STATUSES = tuple(EnvStatus)
# "waiting": the run stopped for a reason outside the env and is retried with backoff (see
# hub_service/pipeline/runner.py); its version keeps why in waiting_code / waiting_reason.
VERSION_STATES = tuple(VersionState)


class EnvRecord(Base):
    """One environment: a Space on the Hub, or a folder of a local source."""

    __tablename__ = "environments"
    __table_args__ = (
        UniqueConstraint("owner", "name", name="uq_environments_owner_name"),
        Index("ix_environments_status_name", "status", "name"),
        Index("ix_environments_gone", "gone"),
        # the listing's sorts read a page in index order and stop (migration 0021)
        Index("ix_environments_gone_name_id", "gone", "name", "id"),
        Index("ix_environments_gone_likes_id", "gone", "likes", "id"),
        Index("ix_environments_gone_updated_at_id", "gone", "updated_at", "id"),
        closed_vocabulary("status", EnvStatus),
        closed_vocabulary("source", SourceKind),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(16))  # "hf" | "local"
    owner: Mapped[str] = mapped_column(String(96))
    name: Mapped[str] = mapped_column(String(96))
    title: Mapped[str | None] = mapped_column(String(256), default=None)
    description: Mapped[str | None] = mapped_column(Text, default=None)
    tags: Mapped[list[str]] = mapped_column(default=list)
    likes: Mapped[int] = mapped_column(Integer, default=0)
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    trusted: Mapped[bool] = mapped_column(Boolean, default=False)
    sha: Mapped[str | None] = mapped_column(String(64), default=None)  # latest known revision of main
    stage: Mapped[str | None] = mapped_column(String(32), default=None)  # runtime stage, raw from the source
    subdomain: Mapped[str | None] = mapped_column(String(255), default=None)
    host: Mapped[str | None] = mapped_column(String(512), default=None)  # https URL of the running Space
    location: Mapped[str | None] = mapped_column(Text, default=None)  # local folder for the local source
    status: Mapped[str] = mapped_column(String(16), default="pending")
    search_text: Mapped[str] = mapped_column(Text, default="")
    # The current revision's openenv.yaml description and "#tag " tokens: text search matches these too.
    manifest_text: Mapped[str] = mapped_column(Text, default="", server_default="")
    last_modified: Mapped[dt.datetime | None] = mapped_column(default=None)
    indexed_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    gone: Mapped[bool] = mapped_column(Boolean, default=False)
    gone_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    # Figures of the latest passing version, kept here so the catalog can sort on them.
    cold_start_s: Mapped[float | None] = mapped_column(Float, default=None)
    step_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    # Trust verdicts of the latest passing version (None: not checked), for the catalog's filters.
    deterministic: Mapped[bool | None] = mapped_column(Boolean, default=None)
    reward_checked: Mapped[bool | None] = mapped_column(Boolean, default=None)
    forkable: Mapped[bool | None] = mapped_column(Boolean, default=None)  # None: no fork check (not offered)
    sessions_held: Mapped[int | None] = mapped_column(Integer, default=None)
    latest_version_id: Mapped[int | None] = mapped_column(Integer, default=None)
    # Runtime health from the scheduler's polls (hub_service/health): running, sleeping, ...
    health: Mapped[str | None] = mapped_column(String(16), default=None)
    health_since: Mapped[dt.datetime | None] = mapped_column(default=None)
    health_checked_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    # Set by a maintainer: the env still resolves, and clients are pointed at the successor.
    deprecated: Mapped[bool] = mapped_column(Boolean, default=False)
    deprecation_reason: Mapped[str | None] = mapped_column(Text, default=None)
    successor: Mapped[str | None] = mapped_column(String(200), default=None)

    versions: Mapped[list[EnvVersion]] = relationship(
        back_populates="env", order_by="EnvVersion.id.desc()", cascade="all, delete-orphan", lazy="raise_on_sql"
    )

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"


class EnvVersion(Base):
    """One revision of an environment and what the pipeline found about it."""

    __tablename__ = "env_versions"
    __table_args__ = (
        UniqueConstraint("env_id", "sha", name="uq_env_versions_env_sha"),
        closed_vocabulary("state", VersionState),
        closed_vocabulary("builder", BuilderKind, nullable=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"), index=True)
    sha: Mapped[str] = mapped_column(String(64))
    ref: Mapped[str] = mapped_column(String(128), default="main")  # "main" or "refs/pr/N"
    state: Mapped[str] = mapped_column(String(16), default=VersionState.QUEUED)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    manifest: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    # The port its server listens on in its container (manifest `port`, else README `app_port`, else 8000).
    port: Mapped[int | None] = mapped_column(Integer, default=None)
    readme: Mapped[str | None] = mapped_column(Text, default=None)
    # What discovery.json, README and pyproject declare (hub_service/catalog/discovery.py), with warnings.
    discovery: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    validation: Mapped[dict[str, Any] | None] = mapped_column(default=None)  # the validate report
    validation_status: Mapped[str | None] = mapped_column(String(16), default=None)  # pass | warn | fail
    # The RFC 008 report (ValidationReportV2, hub lane): the static level from the validate stage,
    # every level once the smoke stage ran (hub_service/pipeline/rfc008.py).
    rfc008: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    build_status: Mapped[str | None] = mapped_column(String(16), default=None)
    builder: Mapped[str | None] = mapped_column(String(16), default=None)  # a BuilderKind: container | process
    image_ref: Mapped[str | None] = mapped_column(String(512), default=None)
    # Where the publish stage pushed the tested image (`<registry>/<owner>/<name>:<sha>`) and the digest the
    # registry gave it (`sha256:...`): clients elsewhere pull `<registry>/<owner>/<name>@<digest>`. Kept for
    # yanked versions too (pins must keep working). None: no registry was configured.
    registry_ref: Mapped[str | None] = mapped_column(String(512), default=None)
    image_digest: Mapped[str | None] = mapped_column(String(71), default=None)
    # the image's signature as published (hub_service/signing.py): tag, payload, signature, key id
    signature: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    build_seconds: Mapped[float | None] = mapped_column(Float, default=None)
    smoke_status: Mapped[str | None] = mapped_column(String(16), default=None)
    cold_start_s: Mapped[float | None] = mapped_column(Float, default=None)
    step_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    step_p95_ms: Mapped[float | None] = mapped_column(Float, default=None)
    # What the smoke stage measured beyond the figures above (hub_service/pipeline/trust.py):
    # the capacity card, the determinism check and the reward sanity check, each a JSON object.
    capacity: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    determinism: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    reward_check: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    failure_stage: Mapped[str | None] = mapped_column(String(16), default=None)
    failure_reason: Mapped[str | None] = mapped_column(Text, default=None)
    # A revision that gave up waiting for the infrastructure: the wait code it failed with.
    failure_code: Mapped[str | None] = mapped_column(String(32), default=None)
    # While state is "waiting": the infrastructure's reason code (no_engine, engine_lost, base_image,
    # source), what it said, and since when the version waits.
    waiting_code: Mapped[str | None] = mapped_column(String(32), default=None)
    waiting_reason: Mapped[str | None] = mapped_column(Text, default=None)
    waiting_since: Mapped[dt.datetime | None] = mapped_column(default=None)
    yanked: Mapped[bool] = mapped_column(Boolean, default=False)
    yank_reason: Mapped[str | None] = mapped_column(Text, default=None)
    # When a client last resolved this version by an explicit pin (full sha or image digest): image
    # collection keeps its image while it is not yanked (hub_service/locks/service.py).
    pinned_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    env: Mapped[EnvRecord] = relationship(back_populates="versions", lazy="raise_on_sql")
