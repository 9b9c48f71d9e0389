"""Hostile Spaces and visitors (issue 22, slice B): untrusted card data in the crawl, forged
cursors, deep webhook JSON, LIKE wildcards, and forged moves. Every one on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import session_scope
from hub_service.indexer.service import IndexReport, index_source
from hub_service.indexer.sources import HfSource, LocalSource
from hub_service.queue.jobs import enqueue_task
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.hub.live import MAINTAINER_TOKEN, Live, env_files
from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT, serve_app


def _envs(factory: sessionmaker[Session]) -> dict[str, EnvRecord]:
    with factory() as s:
        return {e.repo_id: e for e in s.scalars(select(EnvRecord))}


def _card(**front: str) -> str:
    lines = "".join(f"{k}: {v}\n" for k, v in front.items())
    return f"---\n{lines}tags: [openenv]\nsdk: docker\n---\n# An env\n"


# -- 1. one Space never breaks the crawl ---------------------------------------------------------------


def test_oversized_and_odd_card_fields_are_cut_to_fit_and_the_others_are_indexed(
    clean_factory: sessionmaker[Session],
) -> None:
    hostile = space(
        1,
        title="T" * 5000,
        description=["not", "a", "string"],
        tags=["openenv", 7, {"x": 1}, "t" * 999],
        likes=10**30,
        stage="S" * 100,
        host="https://" + "h" * 600,
        subdomain="x\x00y",
    )
    source = ListSource([hostile, space(2), space(3, title="fine\x00title")])
    report = index_source(clean_factory, source)
    assert (report.new, report.rejected) == (3, [])
    envs = _envs(clean_factory)
    bad = envs["user1/env_00001"]
    assert bad.title == "T" * 256 and bad.description is None and bad.likes == 2**31 - 1
    assert bad.tags == ["openenv", "7", "t" * 128] and bad.stage is None and bad.host is None and bad.subdomain == "xy"
    assert envs["user2/env_00002"].title == "Env 2" and envs["user3/env_00003"].title == "finetitle"
    assert index_source(clean_factory, source).jobs == 0  # stable: nothing changes on the next pass


def test_a_space_that_cannot_be_stored_is_left_out_with_a_reason_and_never_marked_gone(
    clean_factory: sessionmaker[Session],
) -> None:
    source = ListSource([space(1), space(2)])
    index_source(clean_factory, source)
    source.envs = [space(1, sha="z" * 80), space(2), space(3, name="n" * 200), space(4)]
    report = index_source(clean_factory, source)
    assert report.new == 1 and report.gone == 0 and len(report.rejected) == 2
    assert "user1/env_00001: its revision" in report.rejected[0] and "not a sha" in report.rejected[0]
    assert "at most 96 characters" in report.rejected[1]
    envs = _envs(clean_factory)
    assert not envs["user1/env_00001"].gone and envs["user1/env_00001"].sha == f"{1:040x}"
    assert "user4/env_00004" in envs and len(envs) == 3


def test_hf_cards_with_lists_and_long_titles_do_not_stop_the_crawl(
    hf_hub: HubStandIn, clean_factory: sessionmaker[Session]
) -> None:
    hf_hub.create_space("mallory/listy", files={"README.md": _card(title="x", short_description="[one, two]")})
    hf_hub.create_space("mallory/long", files={"README.md": _card(title="L" * 400, short_description="ok")})
    hf_hub.create_space("mallory/mapping", files={"README.md": _card(title="{a: 1}")})
    hf_hub.create_space("alice/good", files={"README.md": _card(title="Good env", short_description="plays chess")})
    report = index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token))
    assert (report.new, report.rejected) == (4, [])
    envs = _envs(clean_factory)
    assert envs["mallory/listy"].description is None and envs["mallory/long"].title == "L" * 256
    assert envs["mallory/mapping"].title == "mapping"
    assert (envs["alice/good"].title, envs["alice/good"].description) == ("Good env", "plays chess")


def _local_env(root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    return folder


def _index_within(factory: sessionmaker[Session], source: LocalSource, unblock: Path) -> IndexReport:
    """Index in a thread; a crawl still stuck after 20 s fails the test (and is set free)."""
    result: list[IndexReport] = []
    worker = threading.Thread(target=lambda: result.append(index_source(factory, source)), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        fd = os.open(unblock, os.O_WRONLY | os.O_NONBLOCK)  # let the stuck reader go
        os.close(fd)
        worker.join(10)
        raise AssertionError("indexing the local source blocked on a FIFO named README.md")
    return result[0]


def test_local_readme_fifo_and_symlink_are_never_read(tmp_path: Path, clean_factory: sessionmaker[Session]) -> None:
    root = tmp_path / "envs"
    secret = tmp_path / "outside.md"
    secret.write_text(_card(title="SECRET-FROM-THE-HOST", short_description="leaked"))
    os.mkfifo(_local_env(root, "fifo_env") / "README.md")
    (_local_env(root, "link_env") / "README.md").symlink_to(secret)
    (_local_env(root, "good_env") / "README.md").write_text(_card(title="Good local env"))
    report = _index_within(clean_factory, LocalSource(root), root / "fifo_env" / "README.md")
    assert report.new == 3
    envs = _envs(clean_factory)
    assert envs["local/fifo_env"].title == "fifo_env"
    assert envs["local/link_env"].title == "link_env"
    # the description is openenv.yaml's (the README card gives none it may read), never the linked file's
    assert envs["local/link_env"].description == "Echoes each message back; reward is 0.1 per character."
    assert envs["local/good_env"].title == "Good local env"
    assert all("SECRET" not in (e.search_text or "") for e in envs.values())


# -- 2 and 4. the catalog API: forged cursors, LIKE wildcards ---------------------------------------------


@pytest.fixture()
def api(clean_factory: sessionmaker[Session], hub_settings: HubSettings) -> Iterator[str]:
    index_source(clean_factory, ListSource([space(i) for i in range(12)]))
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        yield url


def _cursor(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_forged_cursors_of_every_type_are_400s_and_real_ones_page(api: str) -> None:
    forged: dict[str, list[list[object]]] = {
        "likes": [["abc", 1], [10**30, 1], [1.5, 1], [{"t": "2026-01-01T00:00:00"}, 1], [1, 2**70], [1, -1], [1, 1.5]],
        "name": [[5, 1], [{"t": "2026-01-01T00:00:00"}, 1], ["a\x00b", 1], ["x", 10**40], ["x", 1, 2]],
        "-updated": [["2026-01-01", 1], [{"t": "yesterday"}, 1], [3, 1]],
        "cold_start": [["fast", 1], ["1e400", 1], [{"t": "2026-01-01T00:00:00"}, 1]],
    }
    for sort, payloads in forged.items():
        for payload in payloads:
            reply = httpx.get(f"{api}/api/v1/envs", params={"sort": sort, "cursor": _cursor(payload)})
            assert reply.status_code == 400, (sort, payload, reply.text)
            assert "start again without it" in reply.json()["error"]["message"]
    inf = httpx.get(
        f"{api}/api/v1/envs", params={"sort": "cold_start", "cursor": base64.urlsafe_b64encode(b"[1e400, 1]").decode()}
    )
    assert inf.status_code == 400
    for sort in ("likes", "-updated", "name", "cold_start"):  # real cursors still page, and only for their sort
        page = httpx.get(f"{api}/api/v1/envs", params={"sort": sort, "limit": 5}).json()
        more = httpx.get(f"{api}/api/v1/envs", params={"sort": sort, "limit": 5, "cursor": page["next_cursor"]})
        assert more.status_code == 200 and len(more.json()["items"]) == 5
    name_cursor = httpx.get(f"{api}/api/v1/envs", params={"sort": "name", "limit": 5}).json()["next_cursor"]
    assert httpx.get(f"{api}/api/v1/envs", params={"sort": "likes", "cursor": name_cursor}).status_code == 400
    assert httpx.get(f"{api}/api/v1/health").status_code == 200


def test_tag_filters_match_tags_literally(api: str) -> None:
    def total(*tags: str) -> int:
        return int(httpx.get(f"{api}/api/v1/envs", params={"tag": list(tags)}).json()["total"])

    assert total("t1") == 4 and total("openenv") == 12
    assert total("%") == 0 and total("t_") == 0 and total("_______") == 0 and total("\\") == 0 and total("%", "t1") == 0


# -- 3 and 5. webhooks: deep JSON, forged moves ------------------------------------------------------------


def test_deeply_nested_webhook_json_is_a_422_and_the_service_keeps_serving(live: Live) -> None:
    before = live.counts()
    for body in (
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b'{"event": {"x": ' + b"[" * 40 + b"]" * 40 + b"}}",
    ):
        reply = live.post(None, content=body)
        assert reply.status_code == 422, reply.text[:200]
        assert "nests arrays or objects more than 32 levels" in reply.json()["error"]["message"]
    brackets_in_strings = live.post(None, content=b'{"pad": "' + b"[" * 5000 + b'"}')
    assert brackets_in_strings.status_code == 422 and "not a Hugging Face webhook payload" in brackets_in_strings.text
    assert httpx.get(f"{live.url}/api/v1/health").status_code == 200
    assert live.counts() == before


def _forged_move(real: dict, old: str, new: str) -> dict:
    return {
        **real,
        "event": {"action": "move", "scope": "repo"},
        "repo": {**real["repo"], "name": old},
        "movedTo": {"name": new},
    }


def test_a_forged_move_is_checked_with_the_hub_and_changes_nothing(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    sha = live.publish("alice/echo_env", env_files("echo_env"))
    live.publish("alice/grid", env_files("echo_env"))
    live.tasks()
    live.bob.create_repo("bob/stolen", repo_type="space", space_sdk="docker")
    real = copy.deepcopy(live.hub.webhooks.deliveries[-1].payload)
    before = live.counts()

    for new in ("bob/stolen", "bob/not_there", "alice/grid"):  # signed with the secret, but the Hub says otherwise
        assert live.post(_forged_move(real, "alice/echo_env", new)).status_code == 202
        assert live.tasks() == ["done"]
    victim = live.env("alice/echo_env")
    assert victim is not None and victim.sha == sha and not victim.gone
    grid = live.env("alice/grid")
    assert live.env("bob/stolen") is None and live.env("bob/not_there") is None and grid is not None and not grid.gone
    after = live.counts()
    assert (after["envs"], after["versions"], after["events"]) == (before["envs"], before["versions"], before["events"])
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "move of alice/echo_env to bob/stolen refused: the Hub still has alice/echo_env" in refusals[0]
    assert "move of alice/echo_env to bob/not_there refused: the Hub has no Space bob/not_there" in refusals[1]
    assert "move of alice/echo_env to alice/grid refused: the Hub still has alice/echo_env" in refusals[2]

    live.alice.move_repo("alice/echo_env", "alice/echo_env_v2", repo_type="space")  # a real move still follows
    assert live.tasks() == ["done"]
    moved = live.env("alice/echo_env_v2")
    assert moved is not None and moved.sha == sha and live.env("alice/echo_env") is None


def test_a_move_to_a_name_without_an_owner_is_ignored_with_an_audit_line(live: Live) -> None:
    """Issue 47: `movedTo` names no owner (the schema lets a bare name through, as legacy models have
    one). The delivery is ignored with the reason and the env's trail says so; a task queued with
    such a name (by an older service) ends done, never with a TypeError, and moves nothing."""
    sha = live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    real = copy.deepcopy(live.hub.webhooks.deliveries[-1].payload)
    before = live.counts()

    reply = live.post(_forged_move(real, "alice/echo_env", "echo_env_v2"))
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "ignored" and "'echo_env_v2' names no owner" in reply.json()["reason"]
    assert live.tasks() == []

    with session_scope(live.factory) as s:  # what a service without the check queued for such a delivery
        enqueue_task(
            s,
            "index_repo",
            "repo:hf:alice/echo_env",
            {"repo": "alice/echo_env", "cause": "webhook delivery 0 (repo move)", "moved_to": "echo_env_v2"},
        )
    assert live.tasks() == ["done"]

    env = live.env("alice/echo_env")
    assert env is not None and env.sha == sha and not env.gone
    events = httpx.get(f"{live.url}/api/v1/envs/alice/echo_env/events").json()["items"]
    ignored = [e for e in events if e["kind"] == "move_ignored"]
    assert len(ignored) == 2 and all(e["details"] == {"moved_to": "echo_env_v2"} for e in ignored)
    assert "names no owner" in ignored[0]["summary"] and ignored[0]["cause"] == "webhook delivery 0 (repo move)"
    assert ignored[1]["cause"] == f"webhook delivery {reply.json()['delivery']} (repo move)"
    after = live.counts()
    assert (after["envs"], after["versions"]) == (before["envs"], before["versions"])
    assert after["events"] == before["events"] + 2  # the two audit lines, nothing else


# -- 4. maintainer revisions match sha prefixes, never patterns ---------------------------------------------


def test_a_yank_by_a_wildcard_revision_is_refused_and_yanks_nothing(live: Live) -> None:
    sha = live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    auth = {"Authorization": f"Bearer {MAINTAINER_TOKEN}"}
    body = {"actor": "mallory", "reason": "wildcards"}
    for revision in ("_______", "%25%25%25%25%25%25%25", sha[:6] + "_", "latest_"):
        reply = httpx.post(f"{live.url}/api/v1/envs/alice/echo_env/versions/{revision}/yank", json=body, headers=auth)
        assert reply.status_code == 400, (revision, reply.text)
        assert "hex digits" in reply.json()["error"]["message"]
    assert httpx.get(f"{live.url}/api/v1/envs/alice/echo_env/versions/_______").status_code == 400
    with live.factory() as s:
        assert not any(s.scalars(select(EnvVersion.yanked)))
    ok = httpx.post(f"{live.url}/api/v1/envs/alice/echo_env/versions/{sha[:7].upper()}/yank", json=body, headers=auth)
    assert ok.status_code == 200 and ok.json()["version"]["sha"] == sha
