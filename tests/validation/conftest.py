from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from openenv.cli.init import render


@pytest.fixture()
def make_env(tmp_path: Path) -> Callable[[str], Path]:
    """Render the Space template as a fresh env folder named `name` (a working env)."""

    def make(name: str = "good_env") -> Path:
        dest = tmp_path / name
        render(dest, name)
        return dest

    return make
