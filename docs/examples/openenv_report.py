"""Read the report of `openenv validate --json` in CI: a markdown summary, annotations, an exit code.

    openenv validate . --json > openenv-report.json
    python openenv_report.py openenv-report.json [--strict]

Writes the summary to $GITHUB_STEP_SUMMARY when set (GitHub Actions), else to stdout; prints one
`::error` / `::warning` annotation per problem (GitHub shows them on the file and line); exits
with the report's exit code (0 pass, 1 fail, 2 not an environment, 3 internal error), or 1 on
warnings with --strict. Needs only the Python standard library.
"""

from __future__ import annotations

import json
import os
import sys


def summary(report: dict) -> str:
    """The report as markdown: the verdict, the counts, and each problem with its fix."""
    icon = {"pass": "✅", "warn": "⚠️", "fail": "❌"}.get(report["status"], "⛔")
    counts = report["summary"]
    lines = [
        f"### {icon} openenv validate: {report['status']}",
        "",
        f"{counts['passed']} passed, {counts['warned']} warnings, {counts['failed']} failed, {counts['skipped']} skipped",
    ]
    if report.get("unsupported_reason"):
        lines += ["", f"Not checked: {report['unsupported_reason']}"]
    problems = [c for c in report["checks"] if c["status"] in ("fail", "warn")]
    if problems:
        lines += ["", "| check | where | problem | fix |", "|---|---|---|---|"]
        for check in problems:
            where = f"{check['file']}:{check['line']}" if check.get("line") else (check.get("file") or "")
            mark = "❌" if check["status"] == "fail" else "⚠️"
            lines.append(
                f"| {mark} `{check['id']}` | {where} | {check['message']} | {check.get('remediation') or ''} |"
            )
    return "\n".join(lines) + "\n"


def annotations(report: dict) -> list[str]:
    """GitHub workflow commands that pin each problem to its file and line."""
    out = []
    for check in report["checks"]:
        if check["status"] not in ("fail", "warn"):
            continue
        level = "error" if check["status"] == "fail" else "warning"
        place = ",".join(f"{k}={check[k]}" for k in ("file", "line") if check.get(k))
        text = f"{check['id']}: {check['message']}" + (f" ({check['remediation']})" if check.get("remediation") else "")
        out.append(f"::{level} {place}::{text}" if place else f"::{level}::{text}")
    return out


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("--")]
    if len(paths) != 1:
        print("usage: openenv_report.py REPORT.json [--strict]", file=sys.stderr)
        return 3
    with open(paths[0], encoding="utf-8") as f:
        report = json.load(f)
    if report.get("report_version") != 1:
        print(f"report_version {report.get('report_version')} is newer than this script reads (1)", file=sys.stderr)
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
    code = int(report["exit_code"])
    if code == 0 and "--strict" in argv and report["summary"]["warned"]:
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
