"""Validating environments: static checks of a folder, runtime checks of a running server.

    from openenv.validation import validate_folder, validate_url

    report = validate_folder("envs/echo_env")
    report.status, report.exit_code, report.problems()

Every check has a stable id, a severity, a message and a remediation (see `checks()` and
docs/validate.md); the `Report` is the document `openenv validate --json` prints.
"""

from __future__ import annotations

from openenv.validation.examples import SchemaExampleError, example_from_schema
from openenv.validation.local import LocalServerError, serve_locally, validate
from openenv.validation.registry import Check, checks
from openenv.validation.report import EXIT_CODES, REPORT_VERSION, CheckResult, Report, Target, report_json_schema
from openenv.validation.runtime import validate_url, validate_url_async
from openenv.validation.static import validate_folder

__all__ = [
    "EXIT_CODES",
    "REPORT_VERSION",
    "Check",
    "CheckResult",
    "LocalServerError",
    "Report",
    "SchemaExampleError",
    "Target",
    "checks",
    "example_from_schema",
    "report_json_schema",
    "serve_locally",
    "validate",
    "validate_folder",
    "validate_url",
    "validate_url_async",
]
