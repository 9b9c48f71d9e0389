"""Upstream OpenEnv 0.10.0's own `openenv validate`, run in its own venv (the `upstream010_python`
fixture): many invocations in one child Python, whose import of upstream's CLI alone takes seconds.
It runs in TMPDIR, never in this checkout, whose `openenv` package would shadow upstream's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

_CLI = """
import json, sys
from typer.testing import CliRunner
from openenv.cli.__main__ import app
for line in sys.stdin:
    args = json.loads(line)
    result = CliRunner().invoke(app, ["validate", *args])
    text = result.stdout
    try:
        report = json.loads(text[text.index("{"):]) if "{" in text else None
    except ValueError:
        report = None
    print(json.dumps({"args": args, "exit_code": result.exit_code, "report": report}), flush=True)
"""


def upstream_validate(python: str, invocations: list[list[str]], timeout_s: float = 600) -> list[dict[str, Any]]:
    """One {"args", "exit_code", "report"} per invocation (the arguments after `validate`), in order;
    "report" is the JSON document it printed (None when it printed none)."""
    out = subprocess.run(
        [python, "-c", _CLI],
        input="\n".join(json.dumps(a) for a in invocations),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=os.environ.get("TMPDIR", "/tmp"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


def upstream_package(python: str) -> Path:
    """The folder of upstream's `openenv.validation` package (its policies and schemas)."""
    out = subprocess.run(
        [python, "-c", "import openenv.validation as v, os; print(os.path.dirname(v.__file__))"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.environ.get("TMPDIR", "/tmp"),
    )
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())
