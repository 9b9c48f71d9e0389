"""Trust signals in the JSON API: badges and verdicts per env, the cards per revision, the
capacity card in the resolve record, and the catalog's filters on them (with search, sorting
and cursors), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app


def capacity(held: int | None, stopped: str = "p99 step latency passed 500 ms") -> dict[str, Any]:
    return {
        "cold_start_s": 0.8,
        "step_p50_ms": 2.0,
        "step_p95_ms": 4.5,
        "image_size_mb": 210.0,
        "server_base_mb": 48.0,
        "idle_session_mb": 0.4,
        "active_session_mb": 1.1,
        "sessions_held": held,
        "ramp": [{"sessions": 1, "p99_ms": 3.0, "errors": 0}, {"sessions": 2, "p99_ms": 9.0, "errors": 0}],
        "stopped_because": stopped,
    }


DETERMINISTIC = {"verdict": "deterministic", "steps_compared": 20, "first_difference": None}
DIFFERS = {
    "verdict": "nondeterministic",
    "steps_compared": 7,
    "first_difference": {"step": 3, "field": "observation.board", "first": "x..", "second": ".x."},
}
STOCHASTIC = {
    "verdict": "stochastic",
    "steps_compared": 0,
    "first_difference": None,
    "reason": "declared stochastic in openenv.yaml",
}
REWARD_OK = {
    "verdict": "ok",
    "observed_min": 0.0,
    "observed_max": 1.0,
    "declared_range": [0, 1],
    "constant": False,
    "probes": [],
    "flags": [],
    "baseline_returns": [0.1, 0.0],
}
REWARD_FLAGGED = {
    "verdict": "flagged",
    "observed_min": 5.0,
    "observed_max": 5.0,
    "declared_range": [0, 1],
    "constant": True,
    "probes": [],
    "flags": ["every step gave the same reward (5.0)", "rewards above the declared maximum 1"],
    "baseline_returns": [5.0],
}
# Atari's card from a Hub before "inconclusive": "ok" beside a note that says the play showed nothing
REWARD_SPARSE = {
    "verdict": "ok",
    "observed_min": 0.0,
    "observed_max": 0.0,
    "declared_range": None,
    "constant": True,
    "probes": {},
    "flags": [],
    "baseline_returns": [0.0, 0.0],
    "notes": ["all 77 rewards seen were 0, but fewer than 2 episodes ended: the reward may be sparse"],
}

# name -> (capacity, determinism, reward_check): what the smoke stage found for these envs
TRUST = {
    "env_00001": (capacity(8), DETERMINISTIC, REWARD_OK),
    "env_00002": (capacity(2), DIFFERS, REWARD_FLAGGED),
    "env_00003": (capacity(16), STOCHASTIC, REWARD_OK),
    "env_00004": (
        {"verdict": "unchecked", "reason": "the server did not start twice"},
        {"verdict": "unchecked", "reason": "x"},
        None,
    ),
    "env_00010": (capacity(32), DETERMINISTIC, REWARD_OK),  # "a chess puzzle"
    "env_00020": (capacity(4), DETERMINISTIC, {"verdict": "unchecked", "reason": "no declared range"}),  # chess too
    "env_00030": (None, None, REWARD_SPARSE),
    "env_00031": (None, None, {**REWARD_SPARSE, "verdict": "inconclusive"}),
}


@pytest.fixture()
def api(clean_factory, hub_settings: HubSettings) -> Iterator[str]:
    index_source(clean_factory, ListSource([space(i) for i in range(40)]))
    with clean_factory.begin() as s:
        for name, (cap, det, reward) in TRUST.items():
            env = s.scalar(select(EnvRecord).where(EnvRecord.name == name))
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.smoke_status, version.image_ref = "passed", "passed", f"openenv-hub/{name}:abc"
            version.capacity, version.determinism, version.reward_check = cap, det, reward
            s.flush()
            apply_verdict(env, version)  # as the runner does when the run ends
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        yield url


def _names(api: str, **params: Any) -> list[str]:
    reply = httpx.get(f"{api}/api/v1/envs", params={"limit": 500, **params})
    assert reply.status_code == 200, reply.text
    return [i["name"] for i in reply.json()["items"]]


def test_summaries_carry_badges_and_verdicts(api: str) -> None:
    items = {i["name"]: i for i in httpx.get(f"{api}/api/v1/envs", params={"limit": 500}).json()["items"]}
    assert items["env_00001"]["badges"] == ["deterministic", "reward_checked", "capacity"]
    assert items["env_00001"]["sessions_held"] == 8 and items["env_00001"]["deterministic"] is True
    flagged = items["env_00002"]
    assert (
        flagged["badges"] == ["capacity"] and flagged["deterministic"] is False and flagged["reward_checked"] is False
    )
    stochastic = items["env_00003"]
    assert stochastic["deterministic"] is False and "deterministic" not in stochastic["badges"]
    unchecked = items["env_00004"]
    assert unchecked["badges"] == [] and unchecked["deterministic"] is None and unchecked["sessions_held"] is None
    assert items["env_00005"]["badges"] == [] and items["env_00005"]["reward_checked"] is None  # never ran
    # a check that could not conclude earns no badge, and is not counted as flagged either
    for name in ("env_00030", "env_00031"):
        assert items[name]["badges"] == [] and items[name]["reward_checked"] is None, items[name]


def test_filters_narrow_the_list_and_compose_with_search(api: str) -> None:
    assert _names(api, deterministic="true") == ["env_00001", "env_00010", "env_00020"]
    assert _names(api, deterministic="false") == ["env_00002", "env_00003"]  # unchecked envs match neither
    assert _names(api, reward_checked="true") == ["env_00001", "env_00003", "env_00010"]
    assert _names(api, reward_checked="false") == ["env_00002"]
    assert _names(api, min_sessions=8) == ["env_00001", "env_00003", "env_00010"]
    assert _names(api, min_sessions=8, deterministic="true", reward_checked="true") == ["env_00001", "env_00010"]
    assert _names(api, q="chess", deterministic="true") == ["env_00010", "env_00020"]
    assert _names(api, q="chess", min_sessions=10) == ["env_00010"]
    assert httpx.get(f"{api}/api/v1/envs", params={"deterministic": "true"}).json()["total"] == 3


def test_sort_by_sessions_held_pages_with_cursors(api: str) -> None:
    full = httpx.get(f"{api}/api/v1/envs", params={"sort": "-sessions", "limit": 500}).json()["items"]
    assert [i["name"] for i in full[:5]] == ["env_00010", "env_00003", "env_00001", "env_00020", "env_00002"]
    assert len(full) == 40 and all(i["sessions_held"] is None for i in full[5:])
    paged, cursor = [], None
    while True:
        page = httpx.get(
            f"{api}/api/v1/envs", params={"sort": "-sessions", "limit": 3, **({"cursor": cursor} if cursor else {})}
        ).json()
        paged += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert [i["id"] for i in paged] == [i["id"] for i in full]
    filtered = httpx.get(f"{api}/api/v1/envs", params={"sort": "-sessions", "deterministic": "true", "limit": 2}).json()
    assert [i["name"] for i in filtered["items"]] == ["env_00010", "env_00001"] and filtered["total"] == 3
    rest = httpx.get(
        f"{api}/api/v1/envs",
        params={"sort": "-sessions", "deterministic": "true", "limit": 2, "cursor": filtered["next_cursor"]},
    ).json()
    assert [i["name"] for i in rest["items"]] == ["env_00020"] and rest["next_cursor"] is None


def test_bad_filter_values_are_clear_4xx(api: str) -> None:
    for params, needle in (
        ({"deterministic": "maybe"}, "deterministic must be true or false"),
        ({"reward_checked": "yes please"}, "reward_checked must be true or false"),
        ({"min_sessions": "-1"}, "min_sessions"),
    ):
        reply = httpx.get(f"{api}/api/v1/envs", params=params)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["code"] == "invalid_request" and needle in reply.json()["error"]["message"]
    not_a_number = httpx.get(f"{api}/api/v1/envs", params={"min_sessions": "lots"})
    assert not_a_number.status_code == 422 and not_a_number.json()["error"]["errors"][0]["loc"][-1] == "min_sessions"


def test_env_and_version_detail_carry_the_cards(api: str) -> None:
    detail = httpx.get(f"{api}/api/v1/envs/user2/env_00002").json()
    assert detail["badges"] == ["capacity"] and detail["capacity"]["sessions_held"] == 2
    assert detail["determinism"]["first_difference"]["step"] == 3
    assert detail["reward_check"]["flags"] == REWARD_FLAGGED["flags"]
    version = httpx.get(f"{api}/api/v1/envs/user2/env_00002/versions/latest").json()
    assert (
        version["capacity"] == capacity(2)
        and version["determinism"] == DIFFERS
        and version["reward_check"] == REWARD_FLAGGED
    )
    untested = httpx.get(f"{api}/api/v1/envs/user5/env_00005/versions/latest").json()
    assert untested["capacity"] is None and untested["determinism"] is None and untested["reward_check"] is None


def test_resolve_record_carries_the_capacity_card(api: str) -> None:
    record = httpx.get(f"{api}/api/v1/envs/user3/env_00003/resolve").json()
    assert record["capacity"]["sessions_held"] == 16
    assert record["capacity"]["stopped_because"] == "p99 step latency passed 500 ms"
    pinned = httpx.get(f"{api}/api/v1/envs/user3/env_00003/resolve", params={"revision": f"{3:040x}"}).json()
    assert pinned["capacity"] == record["capacity"]
    assert httpx.get(f"{api}/api/v1/envs/user5/env_00005/resolve").json()["capacity"] is None


def test_the_reward_card_claims_only_what_the_check_saw() -> None:
    """Atari's card once read "they vary" beside "observed 0 to 0": a sparse reward that never came
    in a few capped episodes is no variation, and the card says what the check noted instead."""
    from hub_service.ui.trust_card import _reward

    html = _reward(REWARD_SPARSE)
    assert "vary" not in html and "declared range" not in html, html
    assert "every reward observed was 0" in html and "the reward may be sparse" in html, html

    html = _reward({**REWARD_OK, "probes": {"empty": {"reward": 0.0, "got_max": False}}})
    assert (
        "Rewards look sound: they vary, they stay in the declared range and an empty or oversized answer "
        "does not score the top." in html
    ), html
    assert "observed 0 to 1" in html, html
    # echo's case: no declared range, and its oversized answer scored the top (a choice, not flagged)
    echo = {**REWARD_OK, "declared_range": None, "probes": {"oversized": {"reward": 1.0, "got_max": True}}}
    assert "does not score the top" not in _reward(echo), _reward(echo)


def test_the_reward_card_states_one_conclusion() -> None:
    """Atari's card said "Rewards look sound: the check found nothing wrong" beside "the reward may be
    sparse", under a green badge: a check that could not conclude now says so, once, and nothing else."""
    import re

    from hub_service.ui.trust_card import _reward

    for card in (REWARD_SPARSE, {**REWARD_SPARSE, "verdict": "inconclusive"}):
        html = _reward(card)
        said = re.findall(r"<p>([^<]*)</p>", html)
        assert said[0].startswith("Inconclusive: the check cannot say whether the rewards are sound: all 77"), html
        assert "look sound" not in html and "nothing wrong" not in html and "Flagged" not in html, html
        assert html.count("the reward may be sparse") == 1, html  # the reason, said once
    free = {**REWARD_OK, "baseline_returns": [], "no_baseline": "no baseline for free-form actions: text"}
    html = _reward(free)
    assert "no baseline for free-form actions" in html and "mean return" not in html, html
    assert _reward({**REWARD_OK, "notes": []}).count("Rewards look sound") == 1


def test_the_website_catalog_has_the_trust_filters_the_docs_describe(api: str) -> None:
    """docs/website.md: "The *Trust* checkboxes keep only envs with those badges, and *Holds at least
    N sessions* only envs one server of which held that many concurrent sessions"."""
    import re

    def shown(**params: Any) -> list[str]:
        page = httpx.get(f"{api}/", params=params)
        assert page.status_code == 200, page.text
        return sorted(re.findall(r'data-env="user\d+/(env_\d+)"', page.text))

    page = httpx.get(f"{api}/").text
    form = page[page.index('<form class="oe-filters"') : page.index("</form>")]
    assert 'id="oe-trust-filter"' in form and ">Trust</legend>" in form, form
    assert 'name="deterministic" value="true"' in form and ">deterministic</label>" in form, form
    assert 'name="reward_checked" value="true"' in form and ">reward checked</label>" in form, form
    assert 'name="min_sessions"' in form and "Holds at least N sessions" in form, form
    assert shown(deterministic="true") == _names(api, deterministic="true") == ["env_00001", "env_00010", "env_00020"]
    assert shown(reward_checked="true") == ["env_00001", "env_00003", "env_00010"]
    assert shown(min_sessions="8", deterministic="true", reward_checked="true") == ["env_00001", "env_00010"]
    assert shown(q="chess", min_sessions="10") == ["env_00010"]
    checked = httpx.get(f"{api}/", params={"reward_checked": "true"}).text
    assert 'name="reward_checked" value="true" id="oe-trust-reward_checked" checked' in checked
    for bad, says in (
        ({"deterministic": "maybe"}, "deterministic must be true or false"),
        ({"min_sessions": "-1"}, "min_sessions"),
    ):
        reply = httpx.get(f"{api}/", params=bad)
        assert reply.status_code == 400 and says in reply.text, reply.text


def _report(**statuses: str) -> dict[str, Any]:
    """An RFC 008 report as the smoke stage keeps it (only what the catalog reads of it)."""
    results = [{"check_id": k.replace("__", "."), "status": s} for k, s in statuses.items()]
    return {"report_schema_version": "2", "lane": "hub", "results": results, "verdict": "warn"}


def test_the_catalog_filters_on_rfc008_check_ids(clean_factory, hub_settings: HubSettings) -> None:
    """`check=ID` keeps envs whose current revision passed that check; `check=ID:STATUS` any status;
    an id RFC 008 does not have, or a status it does not use, is refused with what to do."""
    reports = {
        "env_00001": _report(runtime__episode_determinism="pass", statistical__headroom="pass"),
        "env_00002": _report(runtime__episode_determinism="fail", statistical__headroom="pass"),
        "env_00003": _report(runtime__episode_determinism="skip", statistical__headroom="fail"),
    }
    index_source(clean_factory, ListSource([space(i) for i in range(6)]))
    with clean_factory.begin() as s:
        for name, report in reports.items():
            env = s.scalar(select(EnvRecord).where(EnvRecord.name == name))
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.smoke_status, version.rfc008 = "passed", "passed", report
            s.flush()
            apply_verdict(env, version)
    with serve_app(create_app(hub_settings, run_migrations=False)) as api:
        assert _names(api, check="runtime.episode_determinism") == ["env_00001"]
        assert _names(api, check="runtime.episode_determinism:fail") == ["env_00002"]
        assert _names(api, check="statistical.headroom") == ["env_00001", "env_00002"]
        assert _names(api, check=["statistical.headroom", "runtime.episode_determinism:fail"]) == ["env_00002"]
        assert _names(api, check="semantic.oracle_max") == []  # no report has it
        for bad, says in (
            ("runtime.episode_determinsm", "did you mean runtime.episode_determinism?"),
            ("statistical.headroom:passed", "is not one of pass, fail, skip, error"),
            ("capacity", "docs/validate.md lists the 46 check ids"),
        ):
            reply = httpx.get(f"{api}/api/v1/envs", params={"check": bad})
            assert reply.status_code == 400 and says in reply.text, reply.text
        # the website's catalog page takes the same filter
        page = httpx.get(f"{api}/", params={"check": "runtime.episode_determinism:fail"})
        assert page.status_code == 200 and 'data-env="user2/env_00002"' in page.text
        assert 'data-env="user1/env_00001"' not in page.text
        refused = httpx.get(f"{api}/", params={"check": "nope"})
        assert refused.status_code == 400 and "not an RFC 008 check id" in refused.text


def test_rfc008_badges_are_keyed_by_check_id(clean_factory, hub_settings: HubSettings) -> None:
    """`checks_passed` lists the badge checks the current revision's RFC 008 report passed, in the
    Hub's order; a skip or a failure earns none, nor does a passed check that is not a badge. The
    website's pills carry the check id, and docs/hub-api.md's table is the Hub's list."""
    import re

    from hub_service.catalog.schemas import EnvSummary
    from hub_service.catalog.service import CHECK_BADGES
    from hub_service.ui.trust_card import badge_row
    from tests.support.servers import ROOT

    report = {
        "policy_version": "v2",
        "results": [
            {"check_id": "hub.cosign_signature", "status": "pass"},
            {"check_id": "runtime.episode_determinism", "status": "pass"},
            {"check_id": "runtime.network_policy", "status": "skip"},  # it could not look: no badge
            {"check_id": "statistical.adversarial_floor", "status": "fail"},
            {"check_id": "static.manifest", "status": "pass"},  # passed, but not one the Hub shows
        ],
    }
    index_source(clean_factory, ListSource([space(i) for i in range(2)]))
    with clean_factory.begin() as s:
        for env in s.scalars(select(EnvRecord)):
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.smoke_status = "passed", "passed"
            version.rfc008 = report if env.name == "env_00000" else None
            s.flush()
            apply_verdict(env, version)
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        items = {i["name"]: i for i in httpx.get(f"{url}/api/v1/envs").json()["items"]}
        narrowed = httpx.get(f"{url}/api/v1/envs", params={"check": "hub.cosign_signature"}).json()["items"]
    assert items["env_00000"]["checks_passed"] == ["runtime.episode_determinism", "hub.cosign_signature"]
    assert items["env_00001"]["checks_passed"] == []
    assert [i["name"] for i in narrowed] == ["env_00000"]  # the filter speaks the same ids
    row = badge_row(EnvSummary.model_validate(items["env_00000"]))
    assert re.findall(r'data-check="([^"]+)"', row) == ["runtime.episode_determinism", "hub.cosign_signature"]
    assert ">replays alike<" in row and 'title="hub.cosign_signature: ' in row
    assert badge_row(EnvSummary.model_validate(items["env_00001"])) == ""
    docs = (ROOT / "docs" / "hub-api.md").read_text()
    table = re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| ([a-z ]+) \|$", docs, re.M)
    assert table == [(cid, label) for cid, label, _ in CHECK_BADGES]
