"""`openenv validate [PATH] [--url URL] [--level L] [--policy P] [--json] [--output FILE]`: check an
environment by RFC 008 (upstream OpenEnv 0.10.0's validation contract); `--legacy-report` gives this
SDK's report of version 1 for one more release."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from openenv.cli._output import CliError, Output

if TYPE_CHECKING:
    from openenv.validation.report import Report
    from openenv.validation.rfc008 import ValidationReportV2

DESCRIPTION = """Check an environment by RFC 008's levels: static (the folder: manifest and its `validation:`
block, layout, Dockerfile, pinned dependencies, bill of materials), runtime (the server, served here or
at --url: start-up, rewards, observations against their schema, state, seeds, determinism, declared
tools and tasks) and semantic (the declared oracle and canaries, replayed).

Exit codes: 0 pass (warnings allowed), 1 fail, 2 not an environment / unsupported, 3 internal error
(an unknown --level or --policy among them, as upstream). With --json, stdout is one RFC 008 report
(ValidationReportV2; docs/validate.md describes it)."""

EXAMPLES = """
openenv validate envs/echo_env                   # the static level
openenv validate my_env --level semantic         # also serve it here and replay its oracle and canaries
openenv validate --url http://127.0.0.1:8000     # a running server (runtime level)
openenv validate my_env --json --output report.json --strict   # for CI and bots: warnings fail too
openenv validate my_env --legacy-report --json   # the version 1 report (until the next release)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="the env folder (default: the current folder, unless --url is given)")
    parser.add_argument("--url", help="also (or only) check the server running at this URL")
    parser.add_argument(
        "--level",
        help="the highest level to run: static, runtime or semantic (default: static for a folder; "
        "semantic with --run or --url)",
    )
    parser.add_argument("--policy", help="the severity policy: v1 (static level only) or v2 (default)")
    parser.add_argument(
        "--skip-build",
        action="store_true",
        help="leave out what needs an image build (those checks skip with a reason)",
    )
    parser.add_argument("--output", metavar="FILE", help="also write the JSON report to FILE (the SBOM beside it)")
    parser.add_argument(
        "--run", action="store_true", help="serve the folder locally (no Docker) and run the runtime checks"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument(
        "--legacy-report",
        action="store_true",
        help="this SDK's report of version 1 and its exit codes (kept for one release; docs/validate.md says how to move)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="a failed check of any severity fails the run (skips do not)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="show only problems and the verdict")
    parser.add_argument("--space-id", metavar="OWNER/NAME", help="the Space these files belong to (for the name check)")
    parser.add_argument("--python", metavar="PATH", help="interpreter to import the app with (e.g. the env's venv)")
    parser.add_argument("--no-import", action="store_true", help="do not import the app (untrusted code)")
    parser.add_argument("--token", help="bearer token for --url (default: HF_TOKEN, sent to Hugging Face hosts only)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds allowed for each request of the runtime checks (--url, --run, --level runtime); default 30",
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds allowed for importing the app and starting its server here; default 60",
    )
    parser.add_argument(
        "--steps", type=int, default=20, metavar="N", help="steps timed by the latency check (default 20)"
    )


def run(args: argparse.Namespace, out: Output) -> int:
    path = args.path if args.path is not None else (None if args.url else ".")
    if args.run and path is None:
        raise CliError("--run needs an env folder", "pass the folder: openenv validate PATH --run", exit_code=2)
    for flag, value in (("--timeout", args.timeout), ("--startup-timeout", args.startup_timeout)):
        if not value > 0:
            raise CliError(f"{flag} must be a number of seconds above 0, not {value:g}", f"e.g. {flag} 30", exit_code=2)
    token = args.token
    if token is None and args.url:
        from openenv.client._settings import hf_token, is_hf_host

        token = hf_token() if is_hf_host(args.url) else None
    if args.legacy_report:
        return _legacy(args, out, path, token)
    return _rfc008(args, out, path, token)


def _rfc008(args: argparse.Namespace, out: Output, path: str | None, token: str | None) -> int:
    from openenv.validation.rfc008 import PolicyError, UnsupportedTarget, load_policy, parse_level, validate_package

    try:
        level = parse_level(args.level or ("semantic" if args.run or args.url else "static"))
        load_policy(args.policy)
    except PolicyError as exc:
        raise CliError(str(exc), "openenv validate --help lists the levels and policies", exit_code=3) from None
    output = Path(args.output) if args.output else None
    if output is not None and not output.parent.is_dir():
        raise CliError(f"the folder of --output {output} does not exist", "create it, or write elsewhere", exit_code=3)
    target = " and ".join(t for t in (path, args.url) if t)
    try:
        with out.status(f"validating {target} up to the {level.name.lower()} level"):
            report, legacy = validate_package(
                path,
                url=args.url,
                level=level,
                policy=args.policy,
                skip_build=args.skip_build,
                space_id=args.space_id,
                import_app=not args.no_import,
                python=args.python,
                token=token,
                startup_timeout_s=args.startup_timeout,
                request_timeout_s=args.timeout,
                sbom_path=output.with_name(output.stem + ".sbom.cdx.json") if output else None,
            )
    except UnsupportedTarget as exc:
        raise CliError(str(exc), "give the folder that holds openenv.yaml", exit_code=2) from None
    except PolicyError as exc:
        raise CliError(str(exc), "use --policy v2 for the runtime and semantic levels", exit_code=3) from None
    document = report.model_dump(mode="json")
    if output is not None:
        output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.json:
        out.json(document)
    else:
        _print_rfc008(report, legacy, out, quiet=args.quiet)
    failed_any = any(r.status in ("fail", "error") for r in report.results)
    return 1 if report.verdict == "fail" or (args.strict and failed_any) else 0


def _print_rfc008(report: ValidationReportV2, legacy: Report, out: Output, *, quiet: bool = False) -> None:
    name = legacy.target.name or report.target
    levels = ", ".join(lv.name.lower() for lv in report.levels_run)
    out.heading(f"Validating {name} ({report.target}): policy {report.policy_version}, levels {levels}")
    width = max((len(r.check_id) for r in report.results), default=10)
    for r in report.results:
        if quiet and r.status == "pass":
            continue
        kind = {"pass": "ok", "fail": "fail", "skip": "skip", "error": "fail"}[r.status]
        first = r.evidence[0] if r.evidence else ""
        more = [*r.evidence[1:]] if r.status in ("fail", "error") else []
        if r.remediation and r.status in ("fail", "error"):
            more.append(f"fix: {r.remediation}")
        out.mark(kind, f"{r.check_id:<{width}}  {first}", "\n".join(more) or None)
    counts = {s: sum(1 for r in report.results if r.status == s) for s in ("pass", "fail", "skip", "error")}
    style = {"pass": "bold green", "warn": "bold yellow"}.get(report.verdict, "bold red")
    out.line()
    out.line(
        f"{name}: {report.verdict.upper()} — {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
        + (f", {counts['error']} errors" if counts["error"] else ""),
        style=style,
    )


def _legacy(args: argparse.Namespace, out: Output, path: str | None, token: str | None) -> int:
    from openenv.validation import validate

    target = " and ".join(t for t in (path, args.url) if t)
    with out.status(f"validating {target}"):
        report = validate(
            path,
            url=args.url,
            run=args.run,
            space_id=args.space_id,
            import_app=not args.no_import,
            python=args.python,
            strict=args.strict,
            token=token,
            startup_timeout_s=args.startup_timeout,
            request_timeout_s=args.timeout,
            latency_steps=args.steps,
        )
    if args.json:
        out.json(report.model_dump(mode="json"))
    else:
        _print_human(report, out, path, quiet=args.quiet)
    return report.exit_code


def _print_human(report: Report, out: Output, path: str | None, *, quiet: bool = False) -> None:
    name = report.target.name or (Path(path).resolve().name if path else report.target.url)
    out.heading(f"Validating {name}" + (f" ({report.target.path})" if report.target.path else ""))
    width = max((len(c.id) for c in report.checks), default=10)
    # after a gate failed (not an env), the skipped rest says nothing: leave it out
    hide_skips = quiet or report.status == "unsupported"
    for c in report.checks:
        if (hide_skips and c.status == "skip") or (quiet and c.status == "pass"):
            continue
        where = f"{c.file}:{c.line}: " if c.file and c.line and c.status in ("warn", "fail") else ""
        kind = {"pass": "ok", "warn": "warn", "fail": "fail", "skip": "skip"}[c.status]
        detail = f"fix: {c.remediation}" if c.remediation and c.status in ("warn", "fail") else None
        out.mark(kind, f"{c.id:<{width}}  {where}{c.message}", detail)
    s = report.summary
    verdict = {
        "pass": "PASS",
        "warn": "PASS with warnings",
        "fail": "FAIL",
        "unsupported": "NOT AN ENVIRONMENT",
        "error": "VALIDATOR ERROR",
    }[report.status]
    if report.status == "unsupported" and report.unsupported_reason:
        verdict += f": {report.unsupported_reason}"
    if report.status == "error" and report.error:
        verdict += f": {report.error}"
    strict = " (strict: warnings fail)" if report.strict and s.warned else ""
    out.line()
    style = {"pass": "bold green", "warn": "bold yellow"}.get(report.status, "bold red")
    out.line(
        f"{name}: {verdict}{strict} — {s.passed} passed, {s.warned} warnings, {s.failed} failed, {s.skipped} skipped "
        f"in {report.duration_ms / 1000:.1f} s",
        style=style,
    )
