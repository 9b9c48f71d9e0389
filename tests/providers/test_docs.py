"""The runnable snippets of docs/providers.md (```python blocks) run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.servers import ROOT

DOC = ROOT / "docs" / "providers.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_snippet_runs(code: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "envs"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_there_are_snippets() -> None:
    assert len(BLOCKS) >= 3
