"""Fuzzing the Hub's JSON API from its own OpenAPI spec: no 5xx, whatever the parameters."""

from __future__ import annotations

import httpx
import pytest

from hub_service.app import create_app
from hub_service.indexer.service import index_source
from tests.fuzz.test_env_server_fuzz import fuzz_openapi
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app

pytestmark = pytest.mark.slow


def test_hub_api_never_answers_5xx(clean_factory, hub_settings) -> None:
    index_source(clean_factory, ListSource([space(i) for i in range(40)]))
    settings = hub_settings.model_copy(update={"rate_api_burst": 100_000, "rate_api_per_minute": 1e7})
    with serve_app(create_app(settings, run_migrations=False)) as url:
        calls, failures = fuzz_openapi(url, 60)
        assert calls >= 100
        assert not failures, failures[:5]
        # Still serving after the fuzz, and healthy (the reply may also carry the index's drift counts).
        assert httpx.get(f"{url}/api/v1/health").json()["status"] == "ok"
