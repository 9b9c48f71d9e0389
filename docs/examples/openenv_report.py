"""Read the RFC 008 report of `openenv validate --json` in CI: a markdown summary, annotations, an exit code.

    openenv validate . --json > openenv-report.json
    python openenv_report.py openenv-report.json [--strict]

Writes the summary to $GITHUB_STEP_SUMMARY when set (GitHub Actions), else to stdout; prints one
`::error` / `::warning` annotation per problem (GitHub shows them on the file and line); exits 1
when the verdict is fail (with --strict, when any check failed), else 0, and 3 for a file that is
not a report of version 2. Needs only the Python standard library.
"""

from __future__ import annotations

import json
import os
import sys

_MARK = {"fail": "❌", "error": "⛔", "skip": "➖"}


def _problems(result: dict) -> list[dict]:
    """A failed result's problems, each with where and what: the details it measured, or itself."""
    listed = result.get("measured", {}).get("problems")
    if isinstance(listed, list) and listed:
        return listed
    return [
        {
            "check": None,
            "severity": "error",
            "message": "; ".join(result.get("evidence") or []) or result["status"],
            "remediation": result.get("remediation"),
        }
    ]


def summary(report: dict) -> str:
    """The report as markdown: the verdict, the counts, and each problem with its fix."""
    icon = {"pass": "✅", "warn": "⚠️", "fail": "❌"}[report["verdict"]]
    counts = {s: sum(1 for r in report["results"] if r["status"] == s) for s in ("pass", "fail", "skip", "error")}
    lines = [
        f"### {icon} openenv validate: {report['verdict']}",
        "",
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped, {counts['error']} errors "
        f"(policy {report['policy_version']})",
    ]
    failed = [r for r in report["results"] if r["status"] in ("fail", "error")]
    if failed:
        lines += ["", "| check | where | problem | fix |", "|---|---|---|---|"]
        for result in failed:
            for p in _problems(result):
                where = f"{p['file']}:{p['line']}" if p.get("line") else (p.get("file") or "")
                name = f"`{result['check_id']}`" + (f" (`{p['check']}`)" if p.get("check") else "")
                lines.append(
                    f"| {_MARK[result['status']]} {name} | {where} | {p['message']} | {p.get('remediation') or ''} |"
                )
    skipped = [r for r in report["results"] if r["status"] == "skip"]
    if skipped:
        lines += ["", "Not checked: " + ", ".join(f"`{r['check_id']}`" for r in skipped)]
    return "\n".join(lines) + "\n"


def annotations(report: dict) -> list[str]:
    """GitHub workflow commands that pin each problem to its file and line."""
    out = []
    for result in report["results"]:
        if result["status"] not in ("fail", "error"):
            continue
        for p in _problems(result):
            level = "error" if p.get("severity") == "error" else "warning"
            place = ",".join(f"{k}={p[k]}" for k in ("file", "line") if p.get(k))
            what = f"{p['check']}: " if p.get("check") else ""
            text = f"{result['check_id']}: {what}{p['message']}" + (
                f" ({p['remediation']})" if p.get("remediation") else ""
            )
            out.append(f"::{level} {place}::{text}" if place else f"::{level}::{text}")
    return out


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("--")]
    if len(paths) != 1:
        print("usage: openenv_report.py REPORT.json [--strict]", file=sys.stderr)
        return 3
    try:
        with open(paths[0], encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"{paths[0]} is not a report: {exc} (did openenv validate stop before writing it?)", file=sys.stderr)
        return 3
    if not isinstance(report, dict) or report.get("report_schema_version") != "2":
        print(
            "not an RFC 008 report of version 2: run `openenv validate --json` of openenv-hub 0.1 or later",
            file=sys.stderr,
        )
        return 3
    text = summary(report)
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    for line in annotations(report):
        print(line)
    failed_any = any(r["status"] in ("fail", "error") for r in report["results"])
    return 1 if report["verdict"] == "fail" or ("--strict" in argv and failed_any) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
