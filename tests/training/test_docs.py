"""docs/training.md is a notebook: its Python cells, run top to bottom as one script, work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT

_CELL = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.slow
def test_training_page_runs_as_a_notebook(tmp_path: Path) -> None:
    cells = _CELL.findall((ROOT / "docs" / "training.md").read_text())
    assert len(cells) >= 6
    script = tmp_path / "training_notebook.py"
    script.write_text("\n\n".join(cells))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, f"docs/training.md failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert "200 episodes" in out.stdout and "generate calls" in out.stdout
