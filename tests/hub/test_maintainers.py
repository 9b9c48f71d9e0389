"""Maintainer actions through the API (bearer token): yank, deprecate, re-run; each one an audit
event with who and why; strangers get 401/403 and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import func, select

from hub_service.app import create_app
from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from hub_service.queue import jobs
from hub_service.queue.models import Job
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app

TOKEN = "maintainer-secret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Api:
    url: str
    factory: object

    def post(self, path: str, body: dict, headers: dict | None = None) -> httpx.Response:
        return httpx.post(f"{self.url}/api/v1/envs/{path}", json=body, headers=AUTH if headers is None else headers)

    def get(self, path: str, **params: object) -> httpx.Response:
        return httpx.get(f"{self.url}/api/v1/envs/{path}", params=params)

    def events(self) -> int:
        with self.factory() as s:
            return s.scalar(select(func.count()).select_from(EnvEvent))


@pytest.fixture()
def api(clean_factory, hub_settings) -> Iterator[Api]:
    index_source(clean_factory, ListSource([space(1), space(2)]))
    claim = jobs.claim(clean_factory, "w")  # env_00001 passed its pipeline run (as a worker would finish it)
    assert claim is not None
    jobs.finish(clean_factory, claim.job_id, "w", ok=True)
    with clean_factory.begin() as s:
        version = s.get(EnvVersion, claim.version_id)
        version.state = "passed"
        apply_verdict(s.get(EnvRecord, version.env_id), version)
    settings = hub_settings.model_copy(update={"maintainer_token": SecretStr(TOKEN)})
    with serve_app(create_app(settings, run_migrations=False)) as url:
        yield Api(url, clean_factory)


def _passed(api: Api) -> tuple[str, str]:
    with api.factory() as s:
        env, version = s.execute(
            select(EnvRecord, EnvVersion)
            .join(EnvVersion, EnvVersion.env_id == EnvRecord.id)
            .where(EnvVersion.state == "passed")
        ).one()
    return env.repo_id, version.sha


def test_strangers_are_refused_and_change_nothing(api: Api, hub_settings) -> None:
    repo, sha = _passed(api)
    before = api.events()
    body = {"actor": "mallory", "reason": "because"}
    no_token = api.post(f"{repo}/versions/{sha}/yank", body, headers={})
    assert no_token.status_code == 401 and "Bearer" in no_token.json()["error"]["message"]
    assert api.post(f"{repo}/versions/{sha}/yank", body, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    for wrong in (TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "x"):
        assert (
            api.post(f"{repo}/versions/{sha}/yank", body, headers={"Authorization": f"Bearer {wrong}"}).status_code
            == 403
        )
    assert api.post(f"{repo}/deprecate", body, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert api.events() == before and api.get(f"{repo}/resolve").status_code == 200
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:  # no token configured: disabled
        off = httpx.post(f"{url}/api/v1/envs/{repo}/deprecate", json=body, headers=AUTH)
    assert off.status_code == 403 and "OPENENV_HUB_MAINTAINER_TOKEN" in off.json()["error"]["message"]


def test_a_yanked_revision_resolves_only_when_pinned(api: Api) -> None:
    repo, sha = _passed(api)
    reply = api.post(f"{repo}/versions/{sha[:10]}/yank", {"actor": "carol", "reason": "leaks the seed through /state"})
    assert reply.status_code == 200 and reply.json()["version"]["yanked"] is True
    assert reply.json()["event"]["actor"] == "carol" and reply.json()["event"]["kind"] == "yanked"
    refused = api.get(f"{repo}/resolve")
    assert refused.status_code == 409 and "yanked" in refused.json()["error"]["message"]
    pinned = api.get(f"{repo}/resolve", revision=sha).json()
    assert pinned["revision"] == sha and pinned["yanked"] is True
    detail = api.get(repo).json()
    assert detail["versions"][0]["yank_reason"] == "leaks the seed through /state"
    assert api.post(f"{repo}/versions/{sha}/yank", {"actor": "carol", "reason": "again"}).status_code == 409

    assert api.post(f"{repo}/versions/{sha}/unyank", {"actor": "dave", "reason": "fixed upstream"}).status_code == 200
    assert api.get(f"{repo}/resolve").json()["yanked"] is False
    trail = api.get(f"{repo}/events").json()["items"]
    assert [(e["kind"], e["actor"]) for e in trail[:2]] == [("unyanked", "dave"), ("yanked", "carol")]
    assert trail[1]["cause"] == "maintainer carol: leaks the seed through /state" and trail[1]["sha"] == sha


def test_deprecation_points_at_a_successor(api: Api) -> None:
    repo, _ = _passed(api)
    other = "user2/env_00002"
    unknown = api.post(f"{repo}/deprecate", {"actor": "carol", "reason": "superseded", "successor": "user2/env_0002"})
    assert unknown.status_code == 404 and other in unknown.json()["error"]["suggestions"]
    assert (
        api.post(f"{repo}/deprecate", {"actor": "carol", "reason": "superseded", "successor": repo}).status_code == 400
    )
    assert (
        api.post(f"{repo}/deprecate", {"actor": "carol", "reason": "x", "successor": other}).status_code == 422
    )  # reason too short
    ok = api.post(f"{repo}/deprecate", {"actor": "carol", "reason": "superseded by v2", "successor": other})
    assert ok.status_code == 200 and ok.json()["env"]["deprecated"] is True
    detail = api.get(repo).json()
    assert (detail["deprecated"], detail["successor"], detail["deprecation_reason"]) == (
        True,
        other,
        "superseded by v2",
    )
    resolved = api.get(f"{repo}/resolve").json()
    assert (resolved["deprecated"], resolved["successor"]) == (True, other)
    listed = httpx.get(f"{api.url}/api/v1/envs", params={"q": repo}).json()["items"]
    assert listed[0]["deprecated"] is True and listed[0]["successor"] == other

    assert api.post(f"{repo}/undeprecate", {"actor": "dave", "reason": "v2 was withdrawn"}).status_code == 200
    assert api.get(f"{repo}/resolve").json()["deprecated"] is False
    kinds = [e["kind"] for e in api.get(f"{repo}/events", kind=["deprecated", "undeprecated"]).json()["items"]]
    assert kinds == ["undeprecated", "deprecated"]


def test_rerun_queues_the_pipeline_again_once(api: Api) -> None:
    repo, sha = _passed(api)
    reply = api.post(f"{repo}/versions/latest/rerun", {"actor": "carol", "reason": "the base image was patched"})
    assert reply.status_code == 202
    assert reply.json()["version"]["state"] == "queued" and reply.json()["event"]["kind"] == "queued"
    busy = api.post(f"{repo}/versions/{sha}/rerun", {"actor": "carol", "reason": "impatient"})
    assert busy.status_code == 409 and "already queued" in busy.json()["error"]["message"]
    with api.factory() as s:
        queued = s.scalars(
            select(Job)
            .join(EnvVersion, EnvVersion.id == Job.version_id)
            .where(EnvVersion.sha == sha, Job.state == "queued")
        ).all()
    assert len(queued) == 1 and queued[0].priority < 100
    event = api.get(f"{repo}/events").json()["items"][0]
    assert (
        event["actor"] == "carol"
        and event["details"]["previous"] == "passed"
        and event["details"]["job"] == queued[0].id
    )


def test_events_page_newest_first(api: Api) -> None:
    repo, sha = _passed(api)
    for i in range(5):
        api.post(f"{repo}/versions/{sha}/yank", {"actor": "carol", "reason": f"round {i}"})
        api.post(f"{repo}/versions/{sha}/unyank", {"actor": "carol", "reason": f"round {i}"})
    first = api.get(f"{repo}/events", limit=4).json()
    second = api.get(f"{repo}/events", limit=4, before=first["next_before"]).json()
    ids = [e["id"] for e in first["items"] + second["items"]]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 8
    everything = api.get(f"{repo}/events", limit=500).json()
    assert everything["next_before"] is None and everything["items"][-1]["kind"] == "indexed"
    bad = api.get(f"{repo}/events", kind="exploded")
    assert bad.status_code == 400 and "yanked" in bad.json()["error"]["message"]
