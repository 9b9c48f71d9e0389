"""Every Python snippet of docs/mcp.md and docs/rubrics.md runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import ROOT

PAGES = ["mcp.md", "rubrics.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _snippets() -> list[pytest.ParameterSet]:
    found = []
    for page in PAGES:
        text = (ROOT / "docs" / page).read_text()
        for i, match in enumerate(_BLOCK.finditer(text), start=1):
            found.append(pytest.param(page, i, match.group(1), id=f"{page}-{i}"))
    return found


@pytest.mark.parametrize(("page", "index", "code"), _snippets())
def test_snippet_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    script = tmp_path / f"{Path(page).stem}_{index}.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, f"docs/{page} snippet {index} failed:\n{out.stderr[-3000:]}"
