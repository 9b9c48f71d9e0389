"""The coding env served in-process with a short time limit (runaway cells end quickly) and a
small memory limit (memory hogs hit it quickly)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from coding_env.server import settings as sandbox_settings

from tests.envs.conftest import serve_env

TIMEOUT_S = 3
MEMORY_MB = 256


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    mp = pytest.MonkeyPatch()
    mp.setenv("CODING_ENV_TIMEOUT_S", str(TIMEOUT_S))
    mp.setenv("CODING_ENV_MEMORY_MB", str(MEMORY_MB))
    sandbox_settings.get_settings.cache_clear()
    try:
        with serve_env("coding_env") as base:
            yield base
    finally:
        mp.undo()
        sandbox_settings.get_settings.cache_clear()
