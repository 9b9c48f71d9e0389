"""pytest fixtures for the stand-in Hub (imported by tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT

# huggingface_hub reads these once, at import: no telemetry, no progress bars in test output.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture()
def hf_hub(tmp_path: Path) -> Iterator[HubStandIn]:
    """A fresh stand-in Hub on 127.0.0.1 with user "alice" (`hf_hub.token`), empty."""
    with HubStandIn(tmp_path / "hf-hub") as hub:
        yield hub


@pytest.fixture(scope="session")
def hf1_python() -> str:
    """Python of the venv with this project and huggingface_hub 1.x (made by scripts/hf1-venv)."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "hf1-venv")], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        pytest.fail(f"could not make the huggingface_hub 1.x venv:\n{out.stderr}")
    return out.stdout.strip()
