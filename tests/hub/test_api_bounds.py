"""Bad input at scale (issue 49, item 6): each bound of a listing request is a named setting, and a
request just inside it is served while one just past it (or far past it: a search of 10,000
characters, a filter of 1,000 tags) is a 400 that names the bound, its setting and what to do.
Against a served Hub on 127.0.0.1, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from hub_service.app import create_app
from hub_service.indexer.service import index_source
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app

ENVS = 7


@pytest.fixture()
def envs_url(clean_factory, hub_settings: HubSettings) -> Iterator[str]:
    index_source(clean_factory, ListSource([space(i) for i in range(ENVS)]))
    settings = hub_settings.model_copy(update={"page_size": 2, "page_size_max": 5, "list_offset_max": 4})
    with serve_app(create_app(settings, run_migrations=False)) as url:
        yield f"{url}/api/v1/envs"


def _refused(reply: httpx.Response, *words: str) -> dict[str, object]:
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "invalid_request"
    for word in words:
        assert word in error["message"], error["message"]
    return error


def test_page_size_up_to_its_setting_and_a_400_past_it(envs_url: str) -> None:
    assert len(httpx.get(envs_url).json()["items"]) == 2  # page_size, when no limit is asked for
    inside = httpx.get(envs_url, params={"limit": 5}).json()
    assert len(inside["items"]) == 5 and inside["next_cursor"]
    error = _refused(httpx.get(envs_url, params={"limit": 6}), "limit 6", "limit of 5", "next_cursor")
    assert (error["setting"], error["limit"], error["parameter"]) == ("OPENENV_HUB_PAGE_SIZE_MAX", 5, "limit")
    _refused(httpx.get(envs_url, params={"limit": 10**9}), "OPENENV_HUB_PAGE_SIZE_MAX")


def test_offset_up_to_its_setting_and_never_past_the_end(envs_url: str) -> None:
    everything = [i["id"] for i in httpx.get(envs_url, params={"limit": 5}).json()["items"]]
    at_bound = httpx.get(envs_url, params={"offset": 4, "limit": 1}).json()
    assert [i["id"] for i in at_bound["items"]] == everything[4:5] and at_bound["total"] == ENVS
    # the page's cursor goes on from where the offset left off
    following = httpx.get(envs_url, params={"cursor": at_bound["next_cursor"], "limit": 5}).json()
    assert len(following["items"]) == ENVS - 5
    error = _refused(httpx.get(envs_url, params={"offset": 5}), "offset 5", "limit of 4", "next_cursor")
    assert error["setting"] == "OPENENV_HUB_LIST_OFFSET_MAX"
    # past the last match: the page would be empty, and the message says how many match
    chess = httpx.get(envs_url, params={"q": "chess"}).json()["total"]
    assert chess == 1  # env 0 only, of the seven
    assert len(httpx.get(envs_url, params={"offset": chess - 1, "q": "chess"}).json()["items"]) == 1
    _refused(httpx.get(envs_url, params={"offset": chess, "q": "chess"}), "past the end", f"{chess} environments match")
    _refused(httpx.get(envs_url, params={"offset": 1, "cursor": at_bound["next_cursor"]}), "offset or cursor")
    _refused(httpx.get(envs_url, params={"offset": -1}), "offset must be 0 or more")


def test_a_search_of_10000_characters_is_refused_by_name(envs_url: str) -> None:
    inside = httpx.get(envs_url, params={"q": "g" * 200})  # search_max_chars, by default 200
    assert inside.status_code == 200 and inside.json()["total"] == 0
    _refused(httpx.get(envs_url, params={"q": "g" * 201}), "201 characters", "OPENENV_HUB_SEARCH_MAX_CHARS")
    error = _refused(
        httpx.get(envs_url, params={"q": "g" * 10_000}), "q has 10000 characters", "limit of 200 characters"
    )
    assert error["setting"] == "OPENENV_HUB_SEARCH_MAX_CHARS"
    words = "a grid world env user1 env 1 grid"
    assert len(words.split()) == 8 and httpx.get(envs_url, params={"q": words}).status_code == 200
    _refused(httpx.get(envs_url, params={"q": words + " world"}), "9 words", "OPENENV_HUB_SEARCH_MAX_WORDS")
    # the website's catalog search holds the same bounds, and says them
    website = httpx.get(envs_url.removesuffix("/api/v1/envs") + "/", params={"q": "g" * 201}, timeout=60)
    assert website.status_code == 400 and "OPENENV_HUB_SEARCH_MAX_CHARS" in website.text


def test_a_filter_of_1000_tags_is_refused_by_name(envs_url: str) -> None:
    sixteen = [("tag", "openenv")] * 16  # filter_max_values, by default 16
    inside = httpx.get(envs_url, params=sixteen)
    assert inside.status_code == 200 and inside.json()["total"] == ENVS
    _refused(httpx.get(envs_url, params=[*sixteen, ("tag", "t1")]), "17 values", "OPENENV_HUB_FILTER_MAX_VALUES")
    error = _refused(
        httpx.get(envs_url, params=[("tag", f"t{i}") for i in range(1000)]), "tag has 1000 values", "limit of 16"
    )
    assert (error["parameter"], error["setting"]) == ("tag", "OPENENV_HUB_FILTER_MAX_VALUES")
    assert error["message"] == (  # as docs/hub-api.md (Bounds) shows it
        "tag has 1000 values, over this Hub's limit of 16 values (OPENENV_HUB_FILTER_MAX_VALUES): ask for fewer "
        "tag values (an env must match all of them) and search with q"
    )
    assert httpx.get(envs_url, params={"tag": "t" * 128}).json()["total"] == 0  # filter_max_chars, by default 128
    _refused(httpx.get(envs_url, params={"tag": "t" * 129}), "129 characters", "OPENENV_HUB_FILTER_MAX_CHARS")
    for parameter in ("capability", "task", "check"):
        _refused(httpx.get(envs_url, params=[(parameter, "x")] * 17), f"{parameter} has 17 values")


def test_a_page_size_default_over_its_bound_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="page_size_max"):
        HubSettings(page_size=600, page_size_max=500)
