"""RFC 008's validation report, version 2: the document `openenv validate --json` prints.

Upstream's `report-v2.schema.json` accepts it (tests/validation/test_rfc008.py checks it with the
schema from upstream's own package). Everything we report beyond the schema rides in a result's
`measured` (an open object) and `evidence` (lines of text); the document itself has no room for
more, by design.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.validation.rfc008.manifest import NormalizedManifest, NormalizedManifestV2
from openenv.validation.rfc008.policy import Lane, Level, ResultStatus, Verdict

__all__ = ["REPORT_SCHEMA_VERSION", "ResultV2", "ValidationReportV2", "source_digest"]

REPORT_SCHEMA_VERSION: Literal["2"] = "2"


class ResultV2(BaseModel):
    """One check's outcome. Its weight is the policy's, never the result's own."""

    model_config = ConfigDict(extra="forbid")

    check_id: str = Field(pattern=r"^[a-z_]+\.[a-z_]+$")
    status: ResultStatus
    measured: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list)
    remediation: str | None = None
    duration_s: float = Field(default=0.0, ge=0.0)


class ValidationReportV2(BaseModel):
    model_config = ConfigDict(extra="forbid")

    report_schema_version: Literal["2"] = REPORT_SCHEMA_VERSION
    target: str
    source_digest: str
    signature: Literal["openenv.yaml"] = "openenv.yaml"
    manifest: NormalizedManifestV2 | NormalizedManifest | None
    policy_version: str
    lane: Lane
    levels_run: list[Level]
    results: list[ResultV2]
    verdict: Verdict

    def result(self, check_id: str) -> ResultV2 | None:
        return next((r for r in self.results if r.check_id == check_id), None)

    def statuses(self) -> dict[str, str]:
        """Each check id's status."""
        return {r.check_id: r.status for r in self.results}


# Folders that are not the package's source: a checkout's, a cache's, a run's output.
_NOT_SOURCE = frozenset({".git", "__pycache__", ".venv", ".worktrees", "outputs"})


def source_digest(root: Path) -> str:
    """The sha256 of a package's source: each regular file's relative path and bytes, in path order
    (the digest upstream's validator computes, so both name the same source alike).

    Raises:
        ValueError: the tree holds a symbolic link or something other than files and folders.
        OSError: a file could not be read.
    """
    found: list[tuple[str, Path]] = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if _NOT_SOURCE.intersection(rel.parts):
            continue
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise ValueError(f"{rel.as_posix()} is a symbolic link: a package's source holds files and folders only")
        if stat.S_ISREG(mode):
            found.append((rel.as_posix(), path))
        elif not stat.S_ISDIR(mode):
            raise ValueError(f"{rel.as_posix()} is not a regular file")
    digest = hashlib.sha256()
    for name, path in sorted(found):
        digest.update(name.encode() + b"\0")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()
