"""The catalog's closed vocabularies: stored by value (a `StrEnum` member is its string), and
checked by the database (CHECK constraints in the models and migration 0009_state_checks)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RFC008_FAILURE", "BuilderKind", "EnvStatus", "SourceKind", "VersionState", "check_values"]


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

    DOCKER = "docker"
    PROCESS = "process"


def check_values(column: str, values: type[StrEnum], *, nullable: bool = False) -> str:
    """The SQL of a CHECK constraint that `column` holds one of `values` (or NULL when `nullable`),
    for the models; migration 0009 writes its lists out, and tests/hub/test_lifecycle.py checks that
    the migrated database's constraints hold the same values as the models'."""
    listed = ", ".join(f"'{v.value}'" for v in values)
    check = f"{column} IN ({listed})"
    return f"{column} IS NULL OR {check}" if nullable else check
