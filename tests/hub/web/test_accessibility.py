"""The website for visitors who read it with a screen reader, a keyboard or a phone, in Chromium:
the catalog, an env page and its play panel mid-episode checked by axe-core (the accessibility
engine of browsers' own audits) at desktop and phone widths, with no finding of serious or critical
impact left; and on a phone, the env's picture and actions on the screen after Reset and each step."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from hub_service.app import create_app
from hub_service.settings import HubSettings
from tests.support.servers import ROOT, serve_app
from tests.support.systems import require_system

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]

AXE = ROOT / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"

# Each finding: its rule, impact, what it asks for, and the first few elements it names.
_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => ({rule: v.id, impact: v.impact, help: v.help,
                where: v.nodes.slice(0, 6).map(n => n.target.join(" ") + ": " + n.failureSummary)}));
}"""


def _findings(frame: Any) -> list[dict[str, Any]]:
    frame.add_script_tag(path=str(AXE))
    return list(frame.evaluate(_RUN))


@pytest.fixture()
def axe() -> None:
    if not AXE.exists():
        require_system("axe-core", f"nothing at {AXE}: `bash scripts/browser` installs it (scripts/test does)")


@pytest.mark.parametrize("width", [1280, 390])
def test_catalog_env_page_and_play_have_no_serious_accessibility_findings(
    web_settings: HubSettings, new_page: Any, axe: None, width: int
) -> None:
    with serve_app(create_app(web_settings, run_migrations=False)) as url:
        page = new_page(bypass_csp=True)  # the pages allow no script of the test's own; axe is one
        page.set_viewport_size({"width": width, "height": 900})
        found: dict[str, list[dict[str, Any]]] = {}

        page.goto(url + "/")
        expect(page.locator("a.oe-card").first).to_be_visible()
        found["catalog"] = _findings(page)

        page.goto(url + "/envs/local/echo_env")
        expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
        found["env page"] = _findings(page)

        panel = page.frame_locator("#oe-panel")
        panel.locator("#oe-play-reset").click()
        expect(panel.locator("#oe-steps")).to_have_text("0", timeout=90_000)  # the env's server starts on first play
        frame = page.locator("#oe-panel").element_handle().content_frame()
        found["play panel"] = _findings(frame)
        panel.get_by_role("tab", name="Let a model try").click()
        expect(panel.locator("#oe-try-run")).to_be_visible()
        found["model try panel"] = _findings(frame)

        left = {where: rules for where, rules in found.items() if rules}
        assert left == {}


def _top_on_screen(locator: Any) -> float:
    """Where an element of the framed panel starts on the visitor's screen (px from its top)."""
    return float(
        locator.evaluate("e => e.getBoundingClientRect().top + window.frameElement.getBoundingClientRect().top")
    )


def test_on_a_phone_the_picture_and_actions_are_on_the_screen_after_reset_and_after_each_step(
    web_settings: HubSettings, new_page: Any
) -> None:
    screen = {"width": 390, "height": 844}
    with serve_app(create_app(web_settings, run_migrations=False)) as url:
        page = new_page()
        page.set_viewport_size(screen)
        page.goto(url + "/envs/local/echo_env")
        panel = page.frame_locator("#oe-panel")
        panel.locator("#oe-play-reset").click()
        expect(panel.locator("#oe-steps")).to_have_text("0", timeout=90_000)
        picture, step = panel.locator("#oe-play-frame"), panel.locator("#oe-play-step")
        expect(picture.locator(".oe-frame")).to_be_visible()
        for n in (1, 2):
            # the picture starts within the first screen's top, and the step button under it is on it too
            assert -2 <= _top_on_screen(picture) < screen["height"] / 3
            assert _top_on_screen(step) + 40 <= screen["height"]
            step.click()
            expect(panel.locator("#oe-steps")).to_have_text(str(n), timeout=30_000)
        assert -2 <= _top_on_screen(picture) < screen["height"] / 3
