"""Running the real `openenv` command in tests (the `run_cli` fixture, imported by tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]


def openenv_command(python: str | Path = sys.executable) -> str:
    """The `openenv` console script of the venv `python` belongs to."""
    script = Path(python).parent / "openenv"
    assert script.is_file(), f"{script} is missing: is the project installed in that venv?"
    return str(script)


@pytest.fixture()
def run_cli(tmp_path: Path) -> Run:
    """Run the real `openenv` command in a child process; returns the CompletedProcess."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        python: str | Path = sys.executable,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "OPENENV_"))}
        child_env.update({"HF_HOME": str(tmp_path / "hf-home"), "NO_COLOR": "1", **(env or {})})
        return subprocess.run(
            [openenv_command(python), *args],
            cwd=cwd or tmp_path,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
