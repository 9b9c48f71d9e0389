"""Runs last in the whole session (see conftest): nothing the suite started is still running."""

from __future__ import annotations

from openenv.client.providers import lifecycle
from tests.providers.conftest import RUN_LABEL, _docker_engine


def test_nothing_the_suite_started_is_left_running() -> None:
    assert lifecycle.active_providers() == []
    left = lifecycle.list_running(labels=dict([RUN_LABEL]), docker=_docker_engine() is None)
    assert [(i.kind, i.name) for i in left] == []
