"""`openenv validate [PATH] [--url URL] [--run] [--json]`: check an environment."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from openenv.cli._output import CliError, Output

if TYPE_CHECKING:
    from openenv.validation.report import Report

DESCRIPTION = """Check an environment folder (manifest, app, Dockerfile, README front matter, dependencies)
and/or a running server (health, schema, a WebSocket episode, error handling, latency).

Exit codes: 0 pass (warnings allowed), 1 fail, 2 not an environment / unsupported, 3 internal error.
With --json, stdout is one report document (docs/validate.md describes it)."""

EXAMPLES = """
openenv validate envs/echo_env
openenv validate my_env --run                    # also serve it locally and check it live
openenv validate --url http://127.0.0.1:8000     # a running server
openenv validate my_env --json --strict          # for CI and bots: warnings fail too
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="the env folder (default: the current folder, unless --url is given)")
    parser.add_argument("--url", help="also (or only) check the server running at this URL")
    parser.add_argument(
        "--run", action="store_true", help="serve the folder locally (no Docker) and run the runtime checks"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument("--strict", action="store_true", help="count warnings as failures")
    parser.add_argument("-q", "--quiet", action="store_true", help="show only problems and the verdict")
    parser.add_argument("--space-id", metavar="OWNER/NAME", help="the Space these files belong to (for the name check)")
    parser.add_argument("--python", metavar="PATH", help="interpreter to import the app with (e.g. the env's venv)")
    parser.add_argument("--no-import", action="store_true", help="do not import the app (untrusted code)")
    parser.add_argument("--token", help="bearer token for --url (default: HF_TOKEN, sent to Hugging Face hosts only)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds allowed for imports, startup and each request"
    )
    parser.add_argument(
        "--steps", type=int, default=20, metavar="N", help="steps timed by the latency check (default 20)"
    )


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.validation import validate

    path = args.path if args.path is not None else (None if args.url else ".")
    if args.run and path is None:
        raise CliError("--run needs an env folder", "pass the folder: openenv validate PATH --run", exit_code=2)
    token = args.token
    if token is None and args.url:
        from openenv.client._settings import hf_token, is_hf_host

        token = hf_token() if is_hf_host(args.url) else None
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
            timeout_s=args.timeout,
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
