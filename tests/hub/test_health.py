"""Health tracking: one listing of the runtime per poll (asserted against the stand-in's request
counter), a transition row only when an env's health changes, and the API showing both."""

from __future__ import annotations

import datetime as dt

import httpx
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord
from hub_service.db import utcnow
from hub_service.health.models import HealthTransition
from hub_service.health.service import health_of, poll
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import HfSource
from tests.support.servers import serve_app


def test_one_listing_per_poll_and_transitions_only_on_change(clean_factory, hub_settings, hf_hub) -> None:
    hf_hub.create_spaces(
        [{"repo_id": f"alice/env_{i:03d}", "stage": "RUNNING" if i % 2 else "SLEEPING"} for i in range(230)]
        + [{"repo_id": f"alice/other_{i}", "tags": ["gradio"]} for i in range(5)]
    )
    source = HfSource(hf_hub.url, hf_hub.token)
    assert index_source(clean_factory, source).new == 230

    hf_hub.reset_requests()
    first = poll(clean_factory, source)
    pages = -(-230 // hf_hub.state.page_size)  # the listing's pages: 3 of 100
    assert hf_hub.request_count() == pages == hf_hub.request_count("GET", "/api/{kind}")
    assert (first.seen, first.transitions) == (230, 230)  # every env's first observation

    hf_hub.set_runtime("alice/env_001", stage="SLEEPING")
    hf_hub.set_runtime("alice/env_002", stage="BUILDING")
    hf_hub.set_runtime("alice/env_003", stage="RUNTIME_ERROR")
    hf_hub.set_runtime("alice/env_005", stage="RUNNING_BUILDING")  # still serving: no transition
    hf_hub.reset_requests()
    second = poll(clean_factory, source)
    assert hf_hub.request_count() == pages
    assert second.transitions == 3
    assert poll(clean_factory, source).transitions == 0

    with clean_factory() as s:
        health = {e.name: (e.health, e.stage) for e in s.scalars(select(EnvRecord))}
        assert s.scalar(select(EnvRecord.health_checked_at).where(EnvRecord.name == "env_000")) is not None
    assert health["env_001"] == ("sleeping", "SLEEPING") and health["env_002"] == ("building", "BUILDING")
    assert health["env_003"] == ("error", "RUNTIME_ERROR") and health["env_005"] == ("running", "RUNNING_BUILDING")

    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        view = httpx.get(f"{url}/api/v1/envs/alice/env_003/health").json()
        listed = httpx.get(f"{url}/api/v1/envs", params={"q": "env_003"}).json()["items"]
    assert view["health"] == "error" and view["stage"] == "RUNTIME_ERROR"
    assert [(h["health"], h["previous"]) for h in view["history"]] == [("error", "running"), ("running", None)]
    assert listed[0]["health"] == "error"


def test_running_share_counts_time_in_each_health(clean_factory, hub_settings) -> None:
    now = utcnow()
    with clean_factory.begin() as s:
        env = EnvRecord(
            source="hf", owner="alice", name="flaky", status="passing", tags=[], health="sleeping", search_text=""
        )
        s.add(env)
        s.flush()
        s.add_all(
            [
                HealthTransition(env_id=env.id, health="running", at=now - dt.timedelta(days=3)),
                HealthTransition(env_id=env.id, health="sleeping", previous="running", at=now - dt.timedelta(days=1)),
            ]
        )
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        view = httpx.get(f"{url}/api/v1/envs/alice/flaky/health").json()
        missing = httpx.get(f"{url}/api/v1/envs/alice/flakey/health")
    assert abs(view["running_share"] - 2 / 3) < 0.01
    assert missing.status_code == 404 and "alice/flaky" in missing.json()["error"]["suggestions"]


def test_stages_map_to_health() -> None:
    assert [
        health_of(s)
        for s in ("RUNNING", "SLEEPING", "BUILDING", "APP_STARTING", "BUILD_ERROR", "PAUSED", None, "NEW_STAGE")
    ] == ["running", "sleeping", "building", "building", "error", "stopped", "unknown", "unknown"]
