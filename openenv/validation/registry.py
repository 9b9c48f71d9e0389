"""The registry of checks: each has a stable id, a title, a severity and a remediation.

A check function receives a context and returns `Finding`s (`ok`, `problem`, `skipped`); the
runner turns them into `CheckResult`s of the report. Ids never change meaning: bots and the Hub
key on them. docs/validate.md lists every check (a test keeps it in step with this registry).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv.validation.report import CheckResult, Severity, Status

__all__ = [
    "REGISTRY",
    "Check",
    "Finding",
    "checks",
    "define",
    "ok",
    "problem",
    "register",
    "run_check",
    "skipped",
    "to_result",
]

Stage = Literal["static", "runtime"]


@dataclass(frozen=True, slots=True)
class Finding:
    """What a check found. Build with `ok`, `problem` or `skipped`."""

    kind: Literal["ok", "problem", "skip"]
    message: str
    remediation: str | None = None
    file: str | None = None
    line: int | None = None
    severity: Severity | None = None
    details: dict[str, Any] = field(default_factory=dict)


def ok(message: str, *, file: str | None = None, **details: Any) -> Finding:
    """The check holds."""
    return Finding("ok", message, file=file, details=details)


def problem(
    message: str,
    *,
    remediation: str | None = None,
    file: str | None = None,
    line: int | None = None,
    severity: Severity | None = None,
    **details: Any,
) -> Finding:
    """The check does not hold. `severity` overrides the check's own (e.g. a legacy form: warning)."""
    return Finding("problem", message, remediation, file, line, severity, details)


def skipped(reason: str, **details: Any) -> Finding:
    """The check could not run (a check it depends on failed, or a tool is missing)."""
    return Finding("skip", reason, details=details)


@dataclass(frozen=True, slots=True)
class Check:
    """A registered check.

    Attributes:
        id: stable id, "<area>.<name>".
        title: what it verifies.
        severity: how serious a problem is ("error" fails validation, "warning" does not).
        stage: "static" (a folder) or "runtime" (a running server).
        remediation: the default advice when it does not hold.
        gate: a failure means the target is not an environment we can check (exit code 2).
        fn: the check function for static checks (runtime checks are driven in sequence).
    """

    id: str
    title: str
    severity: Severity
    stage: Stage
    remediation: str
    gate: bool = False
    fn: Callable[[Any], Finding | Iterable[Finding]] | None = None


REGISTRY: dict[str, Check] = {}
_AREAS = ("manifest", "app", "dockerfile", "readme", "deps", "package", "runtime")


def register(
    check_id: str, title: str, *, severity: Severity, stage: Stage, remediation: str, gate: bool = False
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: register `fn` as the check `check_id` (usable bare for runtime checks too)."""

    def deco(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        if check_id in REGISTRY and REGISTRY[check_id].fn is not fn:
            raise ValueError(f"check id {check_id!r} is registered twice")
        REGISTRY[check_id] = Check(check_id, title, severity, stage, remediation, gate, fn)
        return fn

    return deco


def define(check_id: str, title: str, *, severity: Severity, stage: Stage, remediation: str, gate: bool = False) -> str:
    """Register a check without a function (runtime checks); returns its id."""
    REGISTRY[check_id] = Check(check_id, title, severity, stage, remediation, gate, None)
    return check_id


def checks(stage: Stage | None = None) -> list[Check]:
    """Registered checks, in run order.

    The check modules register on import, and `openenv.validation` (which Python runs before any
    of its modules, this one included) imports them all, so every check is here by the time this runs.
    """
    order = {cid: i for i, cid in enumerate(REGISTRY)}
    found = [c for c in REGISTRY.values() if stage is None or c.stage == stage]
    # by area (not by which module happened to load first); within an area, as registered
    return sorted(
        found,
        key=lambda c: (
            _AREAS.index(c.id.split(".")[0]) if c.id.split(".")[0] in _AREAS else len(_AREAS),
            c.id != "runtime.starts",
            order[c.id],
        ),
    )


_STATUS_OF: dict[Severity, Status] = {"error": "fail", "warning": "warn", "info": "pass"}


def to_result(check: Check, finding: Finding, duration_ms: float | None = None) -> CheckResult:
    """The report entry for one finding of `check`."""
    status: Status
    severity: Severity
    if finding.kind == "ok":
        status, severity = "pass", check.severity
    elif finding.kind == "skip":
        status, severity = "skip", "info"
    else:
        severity = finding.severity or check.severity
        status = _STATUS_OF[severity]
    return CheckResult(
        id=check.id,
        title=check.title,
        status=status,
        severity=severity,
        message=finding.message,
        remediation=(finding.remediation or check.remediation) if finding.kind == "problem" else None,
        file=finding.file,
        line=finding.line,
        details=finding.details,
        duration_ms=duration_ms,
    )


def run_check(check: Check, ctx: Any) -> list[CheckResult]:
    """Run one static check on `ctx`; returns its results.

    Raises:
        Exception: whatever the check function raised (the runner reports it as an internal error).
    """
    assert check.fn is not None
    start = time.perf_counter()
    out = check.fn(ctx)
    findings = [out] if isinstance(out, Finding) else list(out)
    elapsed = (time.perf_counter() - start) * 1000
    return [to_result(check, f, round(elapsed, 2)) for f in findings]
