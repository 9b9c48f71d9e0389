"""The bot's comment on a pull request: one markdown document, rewritten as the check progresses.

Everything a Space controls (validation messages, file names, build and smoke errors) reaches the
comment only through `_code` (a one-line code span that cannot be closed early) or `_escape`
(markdown and HTML metacharacters escaped): no links, images, HTML or @mentions of the Space's
making render, and no address of the Hub's own machine (loopback, private and container addresses)
is posted, not even the report link when the Hub has no public address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from hub_service.addresses import why_not_public
from hub_service.catalog.states import RFC008_FAILURE, VersionState

__all__ = ["MARKER", "ReportView", "render"]

# Finds our comment again even if the database lost its id (and tells people what wrote it).
MARKER = "<!-- openenv-hub:pr-check -->"

_STAGE_HELP = {
    "fetch": "The Hub service could not download this revision. Push again, or ask a maintainer to re-run the check.",
    "validate": "Run `openenv validate . --json` in the Space's folder to see the same checks.",
    "build": "The image does not build. Run `openenv build .` (or `docker build .`) locally and fix the first error of the build log.",
    "smoke": "The server did not survive the smoke test (start → reset → step → state). Run `openenv validate . --level semantic` to reproduce it locally.",
    "worker": "The check could not finish for reasons outside the Space. A maintainer can re-run it.",
    "rfc008": "The Space declares a `validation:` block, and the RFC 008 checks below failed it. `openenv validate . "
    "--level semantic --json` runs the local lane's checks; docs/validate.md says what each one needs.",
}


@dataclass
class ReportView:
    """Everything the comment shows, read from the database in one go."""

    repo_id: str
    num: int
    pr_status: str
    sha: str
    state: str  # queued | running | passed | failed | cancelled
    report_url: str
    validation: dict[str, Any] | None = None
    validation_status: str | None = None
    rfc008: dict[str, Any] | None = None  # the RFC 008 report (hub lane), when one was made
    build_status: str | None = None
    smoke_status: str | None = None
    failure_stage: str | None = None
    failure_reason: str | None = None
    figures: dict[str, float | None] = field(default_factory=dict)  # cold_start_s, step_p50_ms, step_p95_ms
    main_sha: str | None = None
    main_figures: dict[str, float | None] = field(default_factory=dict)
    log_url: str | None = None
    waiting_code: str | None = None  # while state is "waiting": what the infrastructure lacks, and its words
    waiting_reason: str | None = None

    @property
    def key(self) -> str:
        """What the comment says, in short: the same key means the same comment."""
        if self.state == VersionState.WAITING:
            return f"{self.sha}:{self.state}:{self.waiting_code}"
        return f"{self.sha}:{self.state}"


def render(view: ReportView) -> str:
    """The markdown comment for `view`."""
    short = re.sub(r"[^0-9a-f]", "", view.sha.lower())[:12]
    heads: dict[str, str] = {
        VersionState.QUEUED: f"### ⏳ OpenEnv checks queued for `{short}`",
        VersionState.RUNNING: f"### ⏳ OpenEnv checks running on `{short}`",
        VersionState.PASSED: f"### ✅ OpenEnv checks passed for `{short}`",
        VersionState.FAILED: f"### ❌ OpenEnv checks failed for `{short}`",
        VersionState.CANCELLED: f"### ⏹️ OpenEnv checks stopped for `{short}`",
        VersionState.WAITING: f"### ⏳ OpenEnv checks waiting for `{short}`",
    }
    head = heads.get(view.state, f"### OpenEnv checks: {view.state} for `{short}`")
    parts = [MARKER, head, ""]
    if view.state == VersionState.WAITING:
        # The Hub's own trouble, never the Space's: said so, and this comment is edited with the verdict.
        reason = view.waiting_reason or view.waiting_code or "unknown"
        parts += [
            f"waiting for the Hub's infrastructure: {_code(reason, 300)}",
            "",
            "Nothing is wrong with this revision; the checks run again by themselves, and this comment is "
            "edited when the verdict lands.",
            "",
        ]
    if view.state == VersionState.CANCELLED:
        parts.append(
            f"This pull request is {view.pr_status}; its checks were stopped."
            if view.pr_status in ("closed", "merged")
            else "The checks of this revision were stopped (a newer push replaced it)."
        )
        parts.append("")
    parts += _stages(view)
    failures = _failures(view)
    if failures:
        parts += ["", "**What failed, and how to fix it**", "", *failures]
    warnings = _warnings(view)
    if warnings:
        parts += ["", f"<details><summary>{len(warnings)} warning(s)</summary>", "", *warnings, "", "</details>"]
    parts += _rfc008(view)
    if view.state == VersionState.PASSED:
        parts += ["", *_latency(view)]
    parts += ["", _links(view)]
    parts += [
        "",
        f"<sub>Checked by the OpenEnv Hub: validate → build → smoke test of `refs/pr/{view.num}` at `{short}`. "
        "This comment is updated on every push.</sub>",
    ]
    return "\n".join(parts) + "\n"


def _mark(status: str | None, running: bool) -> str:
    if status in ("pass", "passed"):
        return "✅ passed"
    if status == "warn":
        return "⚠️ passed with warnings"
    if status in ("fail", "failed", "unsupported", "error"):
        return f"❌ {'failed' if status in ('fail', 'failed') else status}"
    return "⏳ running" if running else "— not run"


def _stages(view: ReportView) -> list[str]:
    running = view.state in (VersionState.QUEUED, VersionState.RUNNING)
    # RFC 008's report may fail the validate stage of a revision whose own checks passed (rfc008_gate)
    failed_at_validate = view.state == VersionState.FAILED and view.failure_stage == "validate"
    rows = [
        ("validate", "fail" if failed_at_validate else view.validation_status),
        ("build", view.build_status),
        ("smoke test", view.smoke_status),
    ]
    lines = ["| stage | result |", "|---|---|"]
    waiting = False
    for name, status in rows:
        lines.append(f"| {name} | {_mark(status, running and not waiting)} |")
        waiting = waiting or status is None
    return lines


def _checks(view: ReportView, status: str) -> list[dict[str, Any]]:
    checks = (view.validation or {}).get("checks") or []
    return [c for c in checks if isinstance(c, dict) and c.get("status") == status]


def _where(check: dict[str, Any]) -> str:
    if not check.get("file"):
        return ""
    line = check.get("line")
    return f" ({_code(check['file'], 200)}" + (f" line {line}" if isinstance(line, int) else "") + ")"


def _failures(view: ReportView) -> list[str]:
    lines = []
    for check in _checks(view, "fail")[:20]:
        lines.append(f"- **{_code(check.get('id'), 100)}**{_where(check)}: {_code(check.get('message'))}")
        if check.get("remediation"):
            lines.append(f"  - Fix: {_escape(check['remediation'])}")
    failed = view.state == VersionState.FAILED
    gated = failed and (view.failure_reason or "").startswith(RFC008_FAILURE)  # the Hub's words, never the Space's
    if gated or (failed and view.failure_stage not in (None, "validate")):
        help_ = _STAGE_HELP["rfc008"] if gated else _STAGE_HELP.get(view.failure_stage or "", _STAGE_HELP["worker"])
        lines.append(f"- **{_escape(view.failure_stage or '')}**: {_code(view.failure_reason or 'no reason recorded')}")
        lines.append(f"  - Fix: {help_}")
    elif view.state == VersionState.FAILED and not lines:
        lines.append(
            f"- **{_escape(view.failure_stage or 'check')}**: {_code(view.failure_reason or 'no reason recorded')}"
        )
        lines.append(f"  - Fix: {_STAGE_HELP['validate']}")
    return lines


def _warnings(view: ReportView) -> list[str]:
    return [
        f"- {_code(c.get('id'), 100)}{_where(c)}: {_code(c.get('message'))}"
        + (f" — {_escape(c['remediation'])}" if c.get("remediation") else "")
        for c in _checks(view, "warn")[:20]
    ]


_RFC008_MARK = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail"}


def _rfc008(view: ReportView) -> list[str]:
    """The RFC 008 report in short: its verdict, each check that failed with its evidence and fix,
    and the ids it could not check (its results are the Space's words too: every one is escaped)."""
    report = view.rfc008 if isinstance(view.rfc008, dict) else None
    results = [r for r in (report or {}).get("results") or [] if isinstance(r, dict)]
    if report is None or not results:
        return []
    levels = ", ".join(str(lv) for lv in report.get("levels_run") or [])
    verdict = _RFC008_MARK.get(str(report.get("verdict")), _code(report.get("verdict"), 20))
    passed = sum(1 for r in results if r.get("status") == "pass")
    lines = [
        "",
        f"**RFC 008 checks** (policy {_code(report.get('policy_version'), 20)}, {_escape(report.get('lane'), 10)} lane, "
        f"levels {_escape(levels, 20)}): {verdict}, {passed} of {len(results)} passed",
    ]
    failed = [r for r in results if r.get("status") in ("fail", "error")]
    if failed:
        lines += ["", "| check | result | evidence | fix |", "|---|---|---|---|"]
        for r in failed[:30]:
            evidence = (r.get("evidence") or [""])[0]
            lines.append(
                f"| {_code(r.get('check_id'), 60)} | {_escape(r.get('status'), 10)} | {_escape(evidence, 300)} | "
                f"{_escape(r.get('remediation') or '', 300)} |"
            )
    skipped = [r for r in results if r.get("status") == "skip"]
    if skipped:
        lines += [
            "",
            f"<details><summary>{len(skipped)} not checked</summary>",
            "",
            *(f"- {_code(r.get('check_id'), 60)}: {_code((r.get('evidence') or [''])[0], 200)}" for r in skipped[:60]),
            "",
            "</details>",
        ]
    return lines


def _latency(view: ReportView) -> list[str]:
    rows = [
        ("cold start", "cold_start_s", "s", 2),
        ("step p50", "step_p50_ms", "ms", 2),
        ("step p95", "step_p95_ms", "ms", 2),
    ]
    if not view.main_sha or not any(view.main_figures.get(k) for _, k, _, _ in rows):
        lines = ["**Latency** (main has no measured revision to compare with yet)", "", "| | this PR |", "|---|---|"]
        for label, key, unit, digits in rows:
            lines.append(f"| {label} | {_num(view.figures.get(key), unit, digits)} |")
        return lines
    lines = [
        f"**Latency** against `main` at `{view.main_sha[:12]}`",
        "",
        "| | this PR | main | change |",
        "|---|---|---|---|",
    ]
    for label, key, unit, digits in rows:
        mine, theirs = view.figures.get(key), view.main_figures.get(key)
        lines.append(
            f"| {label} | {_num(mine, unit, digits)} | {_num(theirs, unit, digits)} | {_change(mine, theirs)} |"
        )
    return lines


def _num(value: float | None, unit: str, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f} {unit}"


def _change(mine: float | None, theirs: float | None) -> str:
    if mine is None or not theirs:
        return "—"
    pct = (mine - theirs) / theirs * 100
    return f"{pct:+.0f}%"


def _links(view: ReportView) -> str:
    """The links to the report; none when the Hub's own address is all there is to link to."""
    if _internal_url(view.report_url):
        return (
            "<sub>No link to the full report: this Hub has no public address (its operator can set "
            "`OPENENV_HUB_PUBLIC_URL`).</sub>"
        )
    return f"[Full report]({view.report_url})" + (
        f" · [log of the failing stage]({view.log_url})" if view.log_url else ""
    )


def _internal_url(url: str) -> bool:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return True
    return not host or _internal_host(host)


def _internal_host(host: str) -> bool:
    host = host.strip("[]").lower().rstrip(".")
    if host in ("localhost", "host.docker.internal") or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        return why_not_public(host) is not None
    except ValueError:  # a name, not an address
        return False


# URLs and bare host:port pairs naming this machine or its containers (loopback, private, link-local).
_ADDRESS = re.compile(
    r"(?i)(?:\b[a-z][a-z0-9+.-]*://)?"
    r"(?:\[[0-9a-f:.]+\]|localhost\b|host\.docker\.internal\b|\d{1,3}(?:\.\d{1,3}){3}\b)"
    r"(?::\d{1,5})?(?:/[^\s`'\"<>]*)?"
)


def _redact(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        raw = match.group(0)
        host = re.sub(r"(?i)^[a-z][a-z0-9+.-]*://", "", raw)
        host = (
            host[1 : host.index("]")]
            if host.startswith("[") and "]" in host
            else re.split(r"[:/]", host, maxsplit=1)[0]
        )
        return "[internal address]" if _internal_host(host) else raw

    return _ADDRESS.sub(swap, text)


def _defuse(text: str) -> str:
    """Break what renders even as plain text: @mentions and bare URLs (a word joiner, invisible)."""
    return re.sub(r"(?i)(www)\.", "\\1\u2060.", text.replace("@", "@\u2060").replace("://", ":\u2060//"))


def _flat(value: object, limit: int) -> str:
    flat = _redact(" ".join(str(value).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _code(value: object, limit: int = 500) -> str:
    """`value` as one inert inline code span: on one line, shortened, internal addresses
    redacted, backticks replaced (the span cannot be closed from inside), mentions and URLs broken."""
    flat = _defuse(_flat(value, limit).replace("`", "\u02cb"))
    return f"`{flat}`" if flat.strip() else "`(empty)`"


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+!|~&])")


def _escape(value: object, limit: int = 500) -> str:
    """`value` as plain text: one line, shortened, internal addresses redacted, every markdown
    and HTML metacharacter backslash-escaped, mentions and URLs broken."""
    return _MARKDOWN.sub(r"\\\1", _defuse(_flat(value, limit)))
