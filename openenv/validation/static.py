"""Static checks of an env folder: manifest, app, Dockerfile, README front matter, dependencies.

Conventions that Spaces on the Hub predate (a pyproject, the `openenv` tag, the name matching
the folder, `spec_version`) are warnings; what stops a Space from building or serving is an
error. `strict=True` (our own envs, `openenv init` output) makes warnings fail too.
"""

from __future__ import annotations

import time
from pathlib import Path

# The check modules register their checks on import, in this order (the report's order).
from openenv.validation import _checks_files, _checks_manifest, _checks_package  # noqa: F401
from openenv.validation._context import FolderContext
from openenv.validation.registry import checks, run_check
from openenv.validation.report import CheckResult, Report, Target

__all__ = ["FolderContext", "validate_folder"]


def validate_folder(
    path: str | Path,
    *,
    space_id: str | None = None,
    import_app: bool = True,
    python: str | None = None,
    strict: bool = False,
    timeout_s: float = 60.0,
) -> Report:
    """Run the static checks on an env folder.

    Args:
        path: the env folder (or a Space's files, downloaded).
        space_id: "owner/name" of the Space the files come from (the name check then uses it).
        import_app: import the app in a child Python (turn off for untrusted code).
        python: interpreter to import the app with (default: this one).
        strict: count warnings as failures.
        timeout_s: limit for importing the app.

    Returns:
        The report; `report.exit_code` is what `openenv validate` exits with. Never raises for a
        bad env; a bug in a check gives a report with status "error".
    """
    from openenv import __version__

    start = time.perf_counter()
    root = Path(path).expanduser()
    ctx = FolderContext(root, space_id=space_id, import_app=import_app, python=python, timeout_s=timeout_s)
    report = Report(tool_version=__version__, target=Target(path=str(root), space_id=space_id), strict=strict)
    unsupported: str | None = None
    error: str | None = None
    for check in checks("static"):
        if unsupported:
            report.checks.append(_skip_result(check.id, check.title, "not a supported OpenEnv environment"))
            continue
        try:
            results = run_check(check, ctx)
        except Exception as exc:  # a bug in a check: say so, keep the others
            error = f"check {check.id} crashed: {type(exc).__name__}: {exc}"
            results = [CheckResult(id=check.id, title=check.title, status="skip", severity="info", message=error)]
        report.checks.extend(results)
        if check.gate and any(r.status == "fail" for r in results):
            unsupported = next(r.message for r in results if r.status == "fail")
    if ctx.manifest is not None:
        report.manifest = ctx.manifest.model_dump(mode="json")
        report.target.name = ctx.manifest.name
    report.duration_ms = round((time.perf_counter() - start) * 1000, 1)
    return report.finish(unsupported=unsupported, error=error)


def _skip_result(check_id: str, title: str, reason: str) -> CheckResult:
    return CheckResult(id=check_id, title=title, status="skip", severity="info", message=reason)
