"""`import openenv.training` and the rollout engine stay light: no torch, transformers, trl or openai."""

from __future__ import annotations

import subprocess
import sys

from tests.support.servers import ROOT


def test_engine_imports_no_ml_stack() -> None:
    code = (
        "import sys, openenv, openenv.training as t; t.RolloutEngine; t.parse_choice; t.EpisodeRecord; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'openai', 'datasets', 'fastapi') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_adapters_load_on_first_use() -> None:
    code = "import sys, openenv.training as t; t.TransformersPolicy; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
