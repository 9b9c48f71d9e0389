"""Trust signals on the website, in headless Chromium at desktop width and at 390 px: the
catalog's badges and trust filters, and the env page's card (capacity, determinism, reward check)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.hub.test_trust_api import DIFFERS, REWARD_FLAGGED, REWARD_OK, STOCHASTIC, capacity
from tests.support.servers import serve_app

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages]

LONG_REASON = "the p99 step latency passed the 500 ms bound at 24 concurrent sessions; " * 3
TRUST = {
    # as the smoke stage writes them: "steps" compared, notes on the card
    "env_00001": (
        {**capacity(16, LONG_REASON), "verdict": "measured", "notes": ["memory read from the container's cgroup"]},
        {"verdict": "deterministic", "seed": 1234, "steps": 20, "first_difference": None},
        REWARD_OK,
    ),
    "env_00002": (capacity(3), DIFFERS, REWARD_FLAGGED),
    "env_00003": (capacity(40), STOCHASTIC, REWARD_OK),
}


@pytest.fixture()
def site(clean_factory, hub_settings: HubSettings) -> Iterator[str]:
    index_source(clean_factory, ListSource([space(i) for i in range(6)]))
    with clean_factory.begin() as s:
        for name, (cap, det, reward) in TRUST.items():
            env = s.scalar(select(EnvRecord).where(EnvRecord.name == name))
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.smoke_status = "passed", "passed"
            version.capacity, version.determinism, version.reward_check = cap, det, reward
            passed = "pass" if name == "env_00001" else "fail"
            version.rfc008 = {
                "lane": "hub",
                "levels_run": [1, 2],
                "verdict": passed,
                "results": [
                    {"check_id": "static.manifest", "status": "pass", "evidence": ["the validation: block parses"]},
                    {"check_id": "runtime.episode_determinism", "status": passed, "evidence": [LONG_REASON]},
                ],
            }
            s.flush()
            apply_verdict(env, version)
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        yield url


def _cards(page) -> list[str]:
    return sorted(page.locator("a.oe-card").evaluate_all("cards => cards.map(c => c.dataset.env)"))


def test_catalog_badges_and_trust_filters_narrow_the_list(site: str, new_page) -> None:
    page = new_page()
    page.goto(site + "/?panel=site")
    expect(page.locator("a.oe-card")).to_have_count(6)
    first = page.locator("a.oe-card[data-env='user1/env_00001']")
    expect(first.locator(".oe-trust-badge")).to_have_text(["deterministic", "reward checked", "holds 16 sessions"])
    expect(page.locator("a.oe-card[data-env='user2/env_00002'] .oe-trust-badge")).to_have_text(["holds 3 sessions"])
    expect(page.locator("a.oe-card[data-env='user4/env_00004'] .oe-trust-badge")).to_have_count(0)
    # RFC 008's badges, keyed by check id: only env_00001's revision passed runtime.episode_determinism
    expect(first.locator(".oe-check-badge")).to_have_attribute("data-check", "runtime.episode_determinism")
    expect(first.locator(".oe-check-badge")).to_have_text("replays alike")
    expect(page.locator("a.oe-card[data-env='user2/env_00002'] .oe-check-badge")).to_have_count(0)

    page.locator("#oe-trust-filter").get_by_label("deterministic").check()
    expect(page.locator("a.oe-card")).to_have_count(1)
    assert _cards(page) == ["user1/env_00001"]
    page.locator("#oe-trust-filter").get_by_label("deterministic").uncheck()
    page.locator("#oe-trust-filter").get_by_label("reward checked").check()
    expect(page.locator("a.oe-card")).to_have_count(2)
    assert _cards(page) == ["user1/env_00001", "user3/env_00003"]
    sessions = page.locator("#oe-min-sessions input")
    sessions.fill("20")
    sessions.press("Enter")
    expect(page.locator("a.oe-card")).to_have_count(1)
    assert _cards(page) == ["user3/env_00003"]
    page.locator("#oe-trust-filter").get_by_label("reward checked").uncheck()
    sessions.fill("")
    sessions.press("Enter")
    expect(page.locator("a.oe-card")).to_have_count(6)
    # by RFC 008 check id: the envs whose Hub report passed it
    page.locator("#oe-check-filter input").click()
    page.get_by_role("option", name="runtime.episode_determinism", exact=True).click()
    expect(page.locator("a.oe-card")).to_have_count(1)
    assert _cards(page) == ["user1/env_00001"]


_GEOMETRY = """() => {
    const card = document.querySelector('#oe-trust'), box = card.getBoundingClientRect();
    return {left: box.left, right: box.right, page: document.documentElement.scrollWidth,
            card: card.scrollWidth, inside: card.clientWidth};
}"""


def _fits(page, width: int) -> None:
    """The trust card lies within the screen, wraps its text, and the page does not scroll sideways.
    Waited for: the page's later components (code, figures) lay themselves out after the card shows."""
    fits = f"""() => {{
        const g = ({_GEOMETRY})();
        return g.left >= 0 && g.right <= {width} + 0.5 && g.page <= {width} && g.card <= g.inside + 1;
    }}"""
    with contextlib.suppress(PlaywrightTimeout):  # the assertions below say what was measured
        page.wait_for_function(fits, timeout=10_000)
    geometry = page.evaluate(_GEOMETRY)
    assert geometry["left"] >= 0 and geometry["right"] <= width + 0.5, geometry
    assert geometry["page"] <= width, geometry
    assert geometry["card"] <= geometry["inside"] + 1, geometry


@pytest.mark.parametrize("width", [1280, 390])
def test_env_page_shows_the_trust_card_and_it_fits_the_screen(site: str, new_page, width: int) -> None:
    page = new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(site + "/?panel=site&env=user1/env_00001")
    expect(page.locator("#oe-env-title")).to_have_text("user1/env_00001")
    expect(page.locator("#oe-env-header .oe-trust-badge")).to_have_text(
        ["deterministic", "reward checked", "holds 16 sessions"]
    )
    card = page.locator("#oe-trust")
    expect(card.locator("#oe-capacity")).to_contain_text("cold start0.8 s")
    expect(card.locator("#oe-capacity")).to_contain_text("p50 2 ms · p95 4.5 ms")
    expect(card.locator("#oe-capacity")).to_contain_text("per idle session 0.4 MB · per active session 1.1 MB")
    expect(card.locator("#oe-capacity")).to_contain_text("16 concurrent sessions per server")
    expect(card.locator("#oe-capacity")).to_contain_text("passed the 500 ms bound at 24 concurrent sessions")
    expect(card.locator("#oe-capacity")).to_contain_text("210 MB")
    expect(card).to_contain_text("memory read from the container's cgroup")
    expect(card.locator("#oe-determinism")).to_contain_text(
        "Deterministic: the same seed gave the same trajectory twice over 20 steps"
    )
    expect(card.locator("#oe-reward-check")).to_contain_text("Rewards look sound")
    # RFC 008's report by check id, folded: its verdict and counts, then a row per check once opened
    report = card.locator("details.oe-rfc008")
    expect(report.locator("summary")).to_have_text("verdict pass (hub lane; levels static, runtime): 2 pass")
    report.locator("summary").click()
    row = report.locator("tr[data-check='runtime.episode_determinism']")
    expect(row).to_have_attribute("data-status", "pass")
    expect(row).to_contain_text("passed the 500 ms bound")
    # nothing sticks out sideways: the long reasons wrap inside the card, and the page does not scroll sideways
    _fits(page, width)

    page.goto(site + "/?panel=site&env=user2/env_00002")
    expect(page.locator("#oe-determinism")).to_contain_text(
        "They first differ at step 3, in observation.board: the first run gave “x..”, the second “.x.”."
    )
    flags = page.locator("#oe-reward-check li")
    expect(flags).to_have_text(REWARD_FLAGGED["flags"])
    expect(page.locator("#oe-reward-check")).to_contain_text("Flagged")
    expect(page.locator("details.oe-rfc008")).to_have_attribute("data-verdict", "fail")
    expect(page.locator("details.oe-rfc008 summary")).to_contain_text("1 pass, 1 fail")
    _fits(page, width)

    page.goto(site + "/?panel=site&env=user3/env_00003")
    expect(page.locator("#oe-determinism")).to_contain_text("Declared stochastic")
    page.goto(site + "/?panel=site&env=user5/env_00005")
    expect(page.locator("#oe-trust")).to_contain_text("Not checked yet")
