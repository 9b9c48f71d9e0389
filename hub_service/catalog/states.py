"""The catalog's closed vocabularies: stored by value (a `StrEnum` member is its string), and
checked by the database (`hub_service.vocabularies`: the models' constraints, made from these)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RFC008_FAILURE", "BuilderKind", "EnvStatus", "SourceKind", "VersionState"]


class VersionState(StrEnum):
    """Where a revision is in the pipeline; `hub_service.lifecycle` owns the moves."""

    QUEUED = "queued"
    RUNNING = "running"
    # Its run stopped for a reason outside the env and comes back with backoff; `waiting_code` says why.
    WAITING = "waiting"
    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# How a failure reason begins when RFC 008's report failed the revision (the setting rfc008_gate).
RFC008_FAILURE = "RFC 008: "


class EnvStatus(StrEnum):
    """An env's status: its latest main revision's verdict; "waiting" before it has one and its
    run waits for the infrastructure (engine, registry, source), not on the env."""

    PENDING = "pending"
    WAITING = "waiting"
    PASSING = "passing"
    FAILING = "failing"


class SourceKind(StrEnum):
    """Where an env's files come from (`hub_service.indexer.source_for` makes one)."""

    HF = "hf"
    LOCAL = "local"


class BuilderKind(StrEnum):
    """How a revision was built (`hub_service.pipeline.builders`)."""

    CONTAINER = "container"  # an image, on the container engine (Docker or Podman); "docker" before 0019
    PROCESS = "process"
