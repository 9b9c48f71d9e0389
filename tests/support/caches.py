"""Caches the client makes during tests (env venvs, downloaded Spaces, records of the servers it
started) go under this run's temporary folder, never the user's `~/.cache/openenv` (issue 31: the
host is left as found). Set through the client's own setting, OPENENV_CACHE_DIR, before any test
runs; the subprocesses tests start inherit it.

scripts/test gives every pytest process of one run (the parallel workers, then the serial run) one
state folder that it removes at the end: the cache lives there, so an env's venv is made once per
run. A pytest process on its own makes its own folder and removes it when it ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

__all__ = ["CACHE_DIR"]

_SHARED = os.environ.get("OPENENV_TEST_STATE_DIR")
CACHE_DIR = Path(_SHARED) / "cache" if _SHARED else Path(tempfile.mkdtemp(prefix="openenv-test-cache-"))
CACHE_DIR.mkdir(parents=True, exist_ok=True)
os.environ["OPENENV_CACHE_DIR"] = str(CACHE_DIR)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _SHARED:  # a shared folder outlives this process: scripts/test removes it at the end
        shutil.rmtree(CACHE_DIR, ignore_errors=True)
