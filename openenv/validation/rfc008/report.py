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

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "ResultV2",
    "ValidationReportV2",
    "check_summary",
    "read_check_summary",
    "source_digest",
]

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


# One letter a status, in a check summary.
_CODE = {"pass": "p", "fail": "f", "skip": "s", "error": "e"}
_STATUS = {v: k for k, v in _CODE.items()}


def check_summary(report: dict[str, Any]) -> dict[str, str] | None:
    """A report in short, for catalogs: its policy, verdict and each check's status as one letter
    in the policy's order (`p` pass, `f` fail, `s` skip, `e` error, `-` not in the report).
    None for what is not a report of a known policy."""
    from openenv.validation.rfc008.policy import POLICY_VERSIONS, load_policy

    if not isinstance(report, dict) or report.get("policy_version") not in POLICY_VERSIONS:
        return None
    got = {r.get("check_id"): r.get("status") for r in report.get("results") or [] if isinstance(r, dict)}
    ids = load_policy(str(report["policy_version"])).entries
    return {
        "policy": str(report["policy_version"]),
        "verdict": str(report.get("verdict")),
        "statuses": "".join(_CODE.get(str(got.get(cid)), "-") for cid in ids),
    }


def read_check_summary(summary: Any) -> dict[str, str]:
    """Each check id's status from `check_summary`'s output (empty for anything else)."""
    from openenv.validation.rfc008.policy import POLICY_VERSIONS, load_policy

    if not isinstance(summary, dict) or summary.get("policy") not in POLICY_VERSIONS:
        return {}
    codes = str(summary.get("statuses") or "")
    ids = list(load_policy(str(summary["policy"])).entries)
    return {cid: _STATUS[c] for cid, c in zip(ids, codes, strict=False) if c in _STATUS}
