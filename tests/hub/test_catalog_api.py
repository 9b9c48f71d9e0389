"""The JSON API: search, filters, sorting, cursor pagination, ETags, detail, resolve, errors."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select, update

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app


@pytest.fixture()
def api(clean_factory, hub_settings: HubSettings) -> Iterator[str]:
    index_source(clean_factory, ListSource([space(i) for i in range(120)]))
    with clean_factory.begin() as s:
        # Give a few envs a verdict, as the pipeline would.
        for name, state, cold in (
            ("env_00001", "passed", 1.5),
            ("env_00002", "failed", None),
            ("env_00003", "passed", 0.7),
        ):
            env = s.scalar(select(EnvRecord).where(EnvRecord.name == name))
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.cold_start_s = state, cold
            version.image_ref = f"openenv-hub/{name}:abc" if state == "passed" else None
            env.latest_version_id = version.id
            env.status = "passing" if state == "passed" else "failing"
            env.cold_start_s = cold
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        yield url


def test_list_pages_through_everything_with_cursors(api: str) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 25, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{api}/api/v1/envs", params=params).json()
        assert page["total"] == 120
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 120 and len(set(seen)) == 120
    assert [s.split("/")[1] for s in seen] == sorted(s.split("/")[1] for s in seen)


@pytest.mark.parametrize("sort", ["-likes", "likes", "-updated", "updated", "cold_start", "-name"])
def test_every_sort_pages_consistently(api: str, sort: str) -> None:
    full = httpx.get(f"{api}/api/v1/envs", params={"sort": sort, "limit": 500}).json()["items"]
    paged, cursor = [], None
    while True:
        page = httpx.get(
            f"{api}/api/v1/envs", params={"sort": sort, "limit": 17, **({"cursor": cursor} if cursor else {})}
        ).json()
        paged += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert [i["id"] for i in paged] == [i["id"] for i in full]
    if sort == "-likes":
        assert [i["likes"] for i in full] == sorted((i["likes"] for i in full), reverse=True)
    if sort == "cold_start":
        assert [i["name"] for i in full[:2]] == ["env_00003", "env_00001"]


def test_search_tags_and_status_filters(api: str) -> None:
    chess = httpx.get(f"{api}/api/v1/envs", params={"q": "chess", "limit": 500}).json()
    assert chess["total"] == 12 and all("chess" in i["description"] for i in chess["items"])
    both = httpx.get(f"{api}/api/v1/envs", params={"q": "chess puzzle user0", "limit": 500}).json()
    assert all(i["owner"] == "user0" for i in both["items"]) and both["total"] >= 1
    tagged = httpx.get(f"{api}/api/v1/envs", params=[("tag", "t1"), ("tag", "openenv"), ("limit", "500")]).json()
    assert tagged["total"] == 40 and all("t1" in i["tags"] for i in tagged["items"])
    passing = httpx.get(f"{api}/api/v1/envs", params={"status": "passing"}).json()
    assert {i["name"] for i in passing["items"]} == {"env_00001", "env_00003"}
    assert httpx.get(f"{api}/api/v1/envs", params={"q": "100%_\\"}).json()["total"] == 0


def test_etag_gives_304_until_something_changes(api: str, clean_factory) -> None:
    first = httpx.get(f"{api}/api/v1/envs", params={"q": "chess"})
    etag = first.headers["etag"]
    again = httpx.get(f"{api}/api/v1/envs", params={"q": "chess"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    with clean_factory.begin() as s:
        s.execute(update(EnvRecord).where(EnvRecord.name == "env_00000").values(likes=12345))
    changed = httpx.get(f"{api}/api/v1/envs", params={"q": "chess"}, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_bad_queries_are_typed_400s(api: str) -> None:
    for params, needle in (
        ({"sort": "bogus"}, "unknown sort"),
        ({"status": "great"}, "unknown status"),
        ({"cursor": "garbage!!"}, "cursor"),
    ):
        reply = httpx.get(f"{api}/api/v1/envs", params=params)
        assert reply.status_code == 400
        assert reply.json()["error"]["code"] == "invalid_request" and needle in reply.json()["error"]["message"]
    zero = httpx.get(f"{api}/api/v1/envs", params={"limit": 0})
    assert zero.status_code == 400 and "limit must be 1 or more" in zero.json()["error"]["message"]


def test_env_detail_and_did_you_mean(api: str) -> None:
    detail = httpx.get(f"{api}/api/v1/envs/user1/env_00001").json()
    assert detail["id"] == "user1/env_00001" and detail["status"] == "passing"
    assert detail["versions"][0]["state"] == "passed"
    assert 'from_hub("user1/env_00001")' in detail["usage"]["python"]
    missing = httpx.get(f"{api}/api/v1/envs/user1/env_0001")
    assert missing.status_code == 404
    body = missing.json()["error"]
    assert body["code"] == "not_found" and "user1/env_00001" in body["suggestions"]


def test_resolve_records(api: str) -> None:
    running = httpx.get(f"{api}/api/v1/envs/user1/env_00001/resolve").json()
    assert running["status"] == "passing" and running["stage"] == "RUNNING"
    assert running["url"] == "https://user1-env-00001.hf.space"
    assert running["revision"] == f"{1:040x}" and running["image"] == "openenv-hub/env_00001:abc"
    assert "docker run" in running["local"]["container"]
    assert running["local"]["docker"] == running["local"]["container"]  # its old name, for older clients (one release)
    sleeping = httpx.get(f"{api}/api/v1/envs/user2/env_00002/resolve").json()
    assert sleeping["url"] is None and sleeping["stage"] == "SLEEPING"
    assert sleeping["image"] == "registry.hf.space/user2-env-00002:latest"
    pinned = httpx.get(f"{api}/api/v1/envs/user1/env_00001/resolve", params={"revision": f"{1:040x}"[:10]}).json()
    assert pinned["revision"] == f"{1:040x}"
    assert httpx.get(f"{api}/api/v1/envs/user1/env_00001/resolve", params={"revision": "deadbeef00"}).status_code == 404


def test_yanked_revision_is_refused_unless_pinned(api: str, clean_factory) -> None:
    with clean_factory.begin() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00003"))
        s.execute(update(EnvVersion).where(EnvVersion.env_id == env.id).values(yanked=True))
    refused = httpx.get(f"{api}/api/v1/envs/user3/env_00003/resolve")
    assert refused.status_code == 409 and "yanked" in refused.json()["error"]["message"]
    pinned = httpx.get(f"{api}/api/v1/envs/user3/env_00003/resolve", params={"revision": f"{3:040x}"})
    assert pinned.status_code == 200 and pinned.json()["yanked"] is True


def test_openapi_and_health(api: str) -> None:
    # The schema is built on the first request (a second or two of CPU, more with the parallel run's load).
    spec = httpx.get(f"{api}/openapi.json", timeout=60).json()
    assert "/api/v1/envs/{owner}/{name}/resolve" in spec["paths"]
    health = httpx.get(f"{api}/api/v1/health", timeout=30).json()
    assert health["status"] == "ok"
    assert health["drift"]["hf"]["passes"] == 1 and health["drift"]["hf"]["last_corrected"] == 0  # a baseline


def test_forged_cursors_are_400_not_500(api: str) -> None:
    import base64
    import json as _json

    for payload in ([[1, 2], 3], [{"t": 5}, 1], ["x"], "nope", [None, "a"], [True, 1]):
        cursor = base64.urlsafe_b64encode(_json.dumps(payload).encode()).decode().rstrip("=")
        reply = httpx.get(f"{api}/api/v1/envs", params={"cursor": cursor})
        assert reply.status_code == 400, (payload, reply.text)


def test_search_finds_words_and_tags_of_the_manifest(clean_factory, hub_settings: HubSettings, tmp_path) -> None:
    import shutil

    from hub_service.catalog.service import apply_verdict
    from hub_service.indexer.sources import LocalSource
    from tests.support.servers import ROOT

    # a bundled env says "cards" only in its openenv.yaml (description and tags), not in its README card
    root = tmp_path / "envs"
    for name in ("blackjack_env", "echo_env"):
        shutil.copytree(ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    assert "cards" not in (root / "blackjack_env" / "README.md").read_text().split("---")[1]
    index_source(clean_factory, LocalSource(root))
    # a Space's manifest is known once the pipeline validated it; a later crawl keeps it searchable
    hf = ListSource([space(1, description="a grid world")])
    index_source(clean_factory, hf)
    with clean_factory.begin() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00001"))
        version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
        version.state, version.manifest = (
            "passed",
            {"name": "env_00001", "description": "Backgammon, Dice-Based", "tags": ["Boardgame"]},
        )
        apply_verdict(env, version)
    hf.envs = [space(1, description="a grid world", likes=99)]
    index_source(clean_factory, hf)
    with serve_app(create_app(hub_settings, run_migrations=False)) as api:

        def names(**params: str) -> set[str]:
            try:
                reply = httpx.get(f"{api}/api/v1/envs", params=params)
            except httpx.ReadTimeout:  # once in CI, under load: say where the server was
                from tests.support.stalls import stall_report

                raise AssertionError(
                    f"the search {params} did not answer in 5 s:\n{stall_report(clean_factory)}"
                ) from None
            return {i["name"] for i in reply.json()["items"]}

        assert names(q="cards") == {"blackjack_env"}  # a manifest tag and a word of its description
        assert names(q="hit stand") == {"blackjack_env"}  # words of the manifest's description only
        assert names(tag="cards") == {"blackjack_env"}
        assert names(q="dice-based boardgame") == {"env_00001"}
        assert names(tag="boardgame") == {"env_00001"}
        assert names(q="echoes") == {"echo_env"}


def test_every_bundled_env_is_described_by_its_openenv_yaml(clean_factory, hub_settings: HubSettings, tmp_path) -> None:
    """The API's `description` was null for all seven bundled envs, whose README cards give none:
    the catalog takes openenv.yaml's, and the website's cards show it. A README card's own
    `short_description` still comes first."""
    import html
    import shutil

    import yaml

    from hub_service.indexer.sources import LocalSource
    from tests.support.servers import ROOT

    root = tmp_path / "envs"
    bundled = sorted(p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())
    assert len(bundled) >= 7, bundled
    for name in bundled:
        shutil.copytree(ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    readme = root / "echo_env" / "README.md"
    readme.write_text(readme.read_text().replace("---\n", "---\nshort_description: Says it back.\n", 1))
    index_source(clean_factory, LocalSource(root))
    with serve_app(create_app(hub_settings, run_migrations=False)) as api:
        items = {i["name"]: i for i in httpx.get(f"{api}/api/v1/envs").json()["items"]}
        page = httpx.get(f"{api}/").text
    for name in bundled:
        wanted = yaml.safe_load((root / name / "openenv.yaml").read_text())["description"]
        if name == "echo_env":
            wanted = "Says it back."
        assert items[name]["description"] == wanted, (name, items[name])
        card = page[page.index(f'data-env="local/{name}"') :]
        assert card[: card.index("</a>")].count(html.escape(wanted[:240])) == 1, (name, card[:600])
