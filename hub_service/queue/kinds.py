"""The job queue's closed vocabularies, stored by value and checked by the database (the
constraints `hub_service.vocabularies` makes from these enums: a new kind is one member here)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["JobKind", "JobState"]


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobKind(StrEnum):
    """What a job does. `pipeline` runs the stages on its version; the others are tasks whose
    handlers the Hub's assembly registers (hub_service/assembly.py), their arguments in
    `payload`. The queue itself knows no handler."""

    PIPELINE = "pipeline"
    INDEX_REPO = "index_repo"  # index one repo (a webhook said it changed)
    PR_SYNC = "pr_sync"  # bring a pull request's check in line with the Hub
    PR_REPORT = "pr_report"  # post or edit the bot's comment
