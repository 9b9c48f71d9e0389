"""Runs last in the whole session (see conftest; on several workers, scripts/test runs it after them,
in the serial run): nothing the suite started is still running. (Each test process also checks at
its end that it stopped every provider it started: tests/conftest.py.)"""

from __future__ import annotations

import pytest

from openenv.client.providers import lifecycle
from tests.providers.conftest import RUN_SET_LABEL, _docker_engine


@pytest.mark.serial
def test_nothing_the_suite_started_is_left_running() -> None:
    assert lifecycle.active_providers() == []
    left = lifecycle.list_running(labels=dict([RUN_SET_LABEL]), docker=_docker_engine() is None)
    assert [(i.kind, i.name) for i in left] == []
