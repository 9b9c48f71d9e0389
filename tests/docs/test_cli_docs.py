"""The CLI/manifest/validation docs: every Python snippet runs, and the checks table is current."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from openenv.validation import checks
from tests.support.servers import ROOT

DOCS = ("cli.md", "manifest.md", "validate.md")
_SNIPPET = re.compile(r"```python\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, int, str]]:
    found = []
    for name in DOCS:
        for i, code in enumerate(_SNIPPET.findall((ROOT / "docs" / name).read_text())):
            found.append((name, i, code))
    return found


@pytest.mark.parametrize(("doc", "index", "code"), _snippets(), ids=lambda v: str(v)[:20])
def test_python_snippets_run(doc: str, index: int, code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{doc} snippet {index} failed:\n{proc.stderr[-2000:]}"


def test_the_checks_table_lists_every_check_in_order() -> None:
    text = (ROOT / "docs" / "validate.md").read_text()
    rows = re.findall(r"^\| `([a-z_.]+)` \| (error|warning) \| (.+) \|$", text, re.M)
    assert [(cid, sev, title) for cid, sev, title in rows] == [(c.id, c.severity, c.title) for c in checks()]
