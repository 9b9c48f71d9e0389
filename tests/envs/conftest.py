"""Fixtures for the reference environments: each served in-process on 127.0.0.1, and each built
into a Docker image once per run (all builds start together, on first use)."""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator

import pytest

from tests.support.servers import serve_app


@contextlib.contextmanager
def serve_env(name: str) -> Iterator[str]:
    """Serve `envs/<name>` (its `server.app:app`) on 127.0.0.1; yields the base URL."""
    app = importlib.import_module(f"{name}.server.app").app
    with serve_app(app) as url:
        yield url


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture()
def server_errors() -> Iterator[list[logging.LogRecord]]:
    """A live list of the ERROR records logged while the test runs, by any thread: the root
    logger's and uvicorn's (which does not propagate to the root)."""
    handler = _Collect()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
