"""The validation report: one document per run, versioned, written by `openenv validate --json`.

Its JSON Schema is published in docs/validate-report.schema.json; `REPORT_VERSION` changes only
when a field changes meaning or disappears (adding fields does not).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EXIT_CODES",
    "REPORT_VERSION",
    "CheckResult",
    "Report",
    "Severity",
    "Status",
    "Summary",
    "Target",
    "report_json_schema",
]

REPORT_VERSION = 1

Severity = Literal["error", "warning", "info"]
Status = Literal["pass", "warn", "fail", "skip"]
Overall = Literal["pass", "warn", "fail", "unsupported", "error"]

# `openenv validate` exits with these; the report carries the same number.
EXIT_CODES: dict[str, int] = {"pass": 0, "warn": 0, "fail": 1, "unsupported": 2, "error": 3}


class CheckResult(BaseModel):
    """The outcome of one check (a check may give several results: one per problem found)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id of the check, e.g. 'manifest.schema'.")
    title: str = Field(description="What the check verifies, in a few words.")
    status: Status = Field(
        description="pass; warn or fail (a problem of severity warning or error); skip (could not run)."
    )
    severity: Severity = Field(description="How serious a problem found by this result is.")
    message: str = Field(description="What was found, in one sentence.")
    remediation: str | None = Field(default=None, description="What to do about it (absent when the check passed).")
    file: str | None = Field(default=None, description="File the result is about, relative to the env folder.")
    line: int | None = Field(default=None, ge=1, description="1-based line in `file`, when known.")
    details: dict[str, Any] = Field(default_factory=dict, description="Measurements and extra data, check-specific.")
    duration_ms: float | None = Field(default=None, ge=0)

    def one_line(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else (f"{self.file}: " if self.file else "")
        return f"{self.id}: {where}{self.message}"


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(default=None, description="The env folder checked, if any.")
    url: str | None = Field(default=None, description="The running server checked, if any.")
    space_id: str | None = Field(default=None, description="The Space the folder belongs to, when known.")
    name: str | None = Field(default=None, description="The environment's name (manifest or /metadata).")


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passed: int = 0
    warned: int = 0
    failed: int = 0
    skipped: int = 0


class Report(BaseModel):
    """Everything one validation run found. `status` and `exit_code` are derived from `checks`."""

    model_config = ConfigDict(extra="forbid")

    report_version: int = Field(default=REPORT_VERSION, description="Version of this document's format.")
    tool: str = "openenv-hub"
    tool_version: str = ""
    target: Target = Field(default_factory=Target)
    strict: bool = Field(default=False, description="Whether warnings counted as failures.")
    status: Overall = Field(
        default="pass",
        description="pass | warn | fail | unsupported (not an env, or too new) | error (the validator failed).",
    )
    exit_code: int = Field(default=0, description="0 pass/warn, 1 fail, 2 unsupported, 3 internal error.")
    summary: Summary = Field(default_factory=Summary)
    checks: list[CheckResult] = Field(default_factory=list)
    manifest: dict[str, Any] | None = Field(
        default=None, description="The manifest as read (with defaults), when valid."
    )
    unsupported_reason: str | None = None
    error: str | None = Field(default=None, description="The internal error, when status is 'error'.")
    created_at: str = Field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    duration_ms: float = 0.0

    def results(self, check_id: str) -> list[CheckResult]:
        """The results of one check."""
        return [c for c in self.checks if c.id == check_id]

    def problems(self) -> list[CheckResult]:
        """Results with status warn or fail, failures first."""
        return sorted((c for c in self.checks if c.status in ("warn", "fail")), key=lambda c: c.status != "fail")

    def finish(self, *, unsupported: str | None = None, error: str | None = None) -> Report:
        """Fill in `summary`, `status` and `exit_code` from the results; returns self."""
        counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for c in self.checks:
            counts[c.status] += 1
        self.summary = Summary(
            passed=counts["pass"], warned=counts["warn"], failed=counts["fail"], skipped=counts["skip"]
        )
        self.unsupported_reason = unsupported or self.unsupported_reason
        self.error = error or self.error
        if self.error:
            self.status = "error"
        elif self.unsupported_reason:
            self.status = "unsupported"
        elif counts["fail"] or (self.strict and counts["warn"]):
            self.status = "fail"
        elif counts["warn"]:
            self.status = "warn"
        else:
            self.status = "pass"
        self.exit_code = EXIT_CODES[self.status]
        return self

    def merge(self, other: Report) -> Report:
        """This report with `other`'s results appended (a folder and its running server)."""
        merged = self.model_copy(deep=True)
        merged.checks.extend(other.checks)
        merged.target = Target(
            path=self.target.path or other.target.path,
            url=self.target.url or other.target.url,
            space_id=self.target.space_id or other.target.space_id,
            name=self.target.name or other.target.name,
        )
        merged.duration_ms = self.duration_ms + other.duration_ms
        merged.manifest = self.manifest or other.manifest
        return merged.finish(unsupported=other.unsupported_reason, error=other.error)


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of the report (published as docs/validate-report.schema.json)."""
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/openenv-hub/openenv-hub/blob/main/docs/validate-report.schema.json"
    schema["title"] = f"openenv validate report, version {REPORT_VERSION}"
    return schema
