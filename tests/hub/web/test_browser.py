"""The website in headless Chromium: a visitor searches the catalog, opens echo_env, reads its
page (the README's script payloads stay inert), plays three steps, runs the random baseline and
an LLM, and leaves; their sessions and the env they ran on are cleaned up."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from pydantic import SecretStr

from hub_service.app import create_app
from hub_service.settings import HubSettings
from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages]
TOKEN = "sk-browser-secret-456"


def _wait(predicate: Any, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_a_visitor_finds_reads_plays_and_lets_models_try_echo_env(web_settings: HubSettings, new_page) -> None:
    standin = openai_standin(api_key=TOKEN, models={"tiny-model"}, replies=['{"message": "hello"}', "no idea, sorry"])
    with serve_app(standin) as llm:
        # the stand-in model runs on 127.0.0.1: visitors may use it because the operator lists it
        app = create_app(web_settings.model_copy(update={"llm_allowed_endpoints": [f"{llm}/v1"]}))
        _visitor_journey(app, standin, llm, new_page)


def _visitor_journey(app, standin, llm: str, new_page) -> None:
    with serve_app(app) as url:
        # the JSON API and its docs still answer beside the website
        assert httpx.get(f"{url}/api/v1/envs").json()["total"] == 2
        assert (
            httpx.get(f"{url}/docs").status_code == 200
            and httpx.get(f"{url}/openapi.json", timeout=60).status_code == 200
        )

        page = new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url + "/?panel=site")
        expect(page.locator("a.oe-card")).to_have_count(2)
        page.locator("#oe-search textarea, #oe-search input").first.fill("echo")
        expect(page.locator("a.oe-card")).to_have_count(1)
        expect(page.locator("a.oe-card")).to_contain_text("local/echo_env")
        page.locator("#oe-search textarea, #oe-search input").first.fill("")
        page.locator("#oe-status input").click()
        page.get_by_role("option", name="failing").click()
        expect(page.locator("a.oe-card")).to_have_count(1)
        expect(page.locator("a.oe-card")).to_contain_text("bad_manifest")
        page.locator("#oe-status input").click()
        page.get_by_role("option", name="passing").click()
        page.locator("a.oe-card[data-env='local/echo_env']").click()

        # the env page: badges, README (sanitized), usage, checks
        expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
        expect(page.locator("#oe-badges .oe-ok")).to_have_count(3)  # validated, built, smoke-tested (not live)
        expect(page.locator("#oe-readme")).to_contain_text("SAFE-README-MARKER")
        expect(page.locator("#oe-usage-python")).to_contain_text('from_hub("local/echo_env")')
        expect(page.locator("#oe-usage-shell")).to_contain_text("openenv fork local/echo_env")
        readme = page.locator("#oe-readme .oe-readme")  # the README itself, inside Gradio's wrappers
        assert readme.locator("script, iframe, svg, [onerror], [onload], [ontoggle], [style]").count() == 0
        assert readme.locator("a[href^='javascript']").count() == 0
        readme.get_by_text("click me").click()  # its javascript: href was dropped: nothing runs
        page.get_by_role("tab", name="Checks").click()
        expect(page.locator("#oe-report")).to_contain_text("manifest")
        expect(page.locator("#oe-figures")).to_contain_text("cold start")
        expect(page.locator("#oe-stages")).to_contain_text("smoke")

        # play three steps in a session of this tab's own
        page.get_by_role("tab", name="Play").click()
        page.click("#oe-play-reset")
        message = page.locator("#oe-field-message textarea, #oe-field-message input").first
        for i, text in enumerate(["hi", "there", "you"], 1):
            message.fill(text)
            page.click("#oe-play-step")
            expect(page.locator("#oe-history tr")).to_have_count(i + 1)
        expect(page.locator("#oe-play-observation")).to_contain_text("you")
        expect(page.locator("#oe-steps")).to_have_text("3")
        assert app.state.play.stats()["sessions"] == 1

        # the action as JSON: it shows the form's action, edits fill the form back, and JSON the form
        # cannot show stays open with the reason
        json_mode = page.locator("#oe-play-json-mode input")
        editor = page.locator("#oe-play-json .cm-content")
        json_mode.check()
        expect(editor).to_contain_text('"message": "you"')
        editor.fill('{"message": "from json"}')
        json_mode.uncheck()
        expect(page.locator("#oe-play-json")).to_be_hidden()
        expect(message).to_have_value("from json")
        page.click("#oe-play-step")
        expect(page.locator("#oe-play-observation")).to_contain_text("from json")
        expect(page.locator("#oe-steps")).to_have_text("4")
        json_mode.check()
        editor.fill('{"message": "x", "typo": 1}')
        # A click, not `uncheck()`: the Hub ticks the box again at once, and `uncheck()` fails when that
        # reply lands before Playwright reads the box back ("did not change its state", seen in CI).
        json_mode.click()
        expect(page.locator(".toast-body")).to_contain_text("the form has no field for typo")
        expect(json_mode).to_be_checked()
        expect(editor).to_contain_text('"typo": 1')
        expect(message).to_have_value("from json")
        editor.fill('{"message": "x"}')
        json_mode.uncheck()
        expect(message).to_have_value("x")

        # the random baseline: echo's messages are free-form text, so it has none (and scores nothing)
        page.get_by_role("tab", name="Let a model try").click()
        page.click("#oe-try-run")
        expect(page.locator("#oe-try-stopped")).to_contain_text("no baseline for free-form actions", timeout=60_000)
        expect(page.locator("#oe-score")).to_have_count(0)

        # an LLM plays: its unparsable answer is shown and counted; its token appears nowhere
        page.get_by_label("LLM (OpenAI-compatible endpoint)").check()
        page.locator("#oe-try-base-url textarea, #oe-try-base-url input").first.fill(f"{llm}/v1")
        page.locator("#oe-try-model textarea, #oe-try-model input").first.fill("tiny-model")
        page.locator("#oe-try-token input").fill(TOKEN)
        page.click("#oe-try-run")
        expect(page.locator("#oe-score")).to_contain_text("score", timeout=60_000)
        expect(page.locator("#oe-trajectory")).to_contain_text("no idea, sorry")
        assert int(page.locator("#oe-invalid").inner_text()) >= 3
        assert TOKEN not in page.content()
        assert all(r["headers"]["authorization"] == f"Bearer {TOKEN}" for r in standin.state.requests)

        assert page.evaluate("() => window.__pwned === undefined") and not dialogs, dialogs
        # leaving the page ends the visitor's sessions and stops the env they used
        page.close()
        assert _wait(lambda: app.state.play.stats() == {"sessions": 0, "visitors": 0, "instances": []}), (
            app.state.play.stats()
        )


def test_two_visitors_play_separately_a_bad_env_id_is_explained_and_history_shown(
    web_settings: HubSettings, new_page
) -> None:
    app = create_app(web_settings.model_copy(update={"maintainer_token": SecretStr("m41nt")}))
    with serve_app(app) as url:
        first, second = new_page(), new_page()
        for page in (first, second):
            page.goto(url + "/?panel=site&env=local/echo_env")
            page.get_by_role("tab", name="Play").click()
            page.click("#oe-play-reset")
            expect(page.locator("#oe-field-message textarea, #oe-field-message input").first).to_be_visible()
        first.locator("#oe-field-message textarea, #oe-field-message input").first.fill("mine")
        first.click("#oe-play-step")
        expect(first.locator("#oe-history tr")).to_have_count(2)
        expect(second.locator("#oe-play-history")).to_contain_text("No step yet")
        stats = app.state.play.stats()
        assert stats["sessions"] == 2 and len(stats["instances"]) == 1
        # an env that failed its checks cannot be played, and says why
        second.goto(url + "/?panel=site&env=local/bad_manifest")
        second.get_by_role("tab", name="Play").click()
        second.click("#oe-play-reset")
        expect(second.locator("#oe-play-error")).to_contain_text("cannot be played")
        third = new_page()
        third.goto(url + "/?panel=site&env=local/no_such_env")
        expect(third.locator("#oe-env-header")).to_contain_text("no environment local/no_such_env")
        assert _wait(lambda: app.state.play.stats()["sessions"] == 1)  # the second visitor's page reload ended theirs

        # a maintainer deprecates bad_manifest for echo_env: its page says so and links the successor;
        # its history tab shows the audit trail, newest first
        deprecated = httpx.post(
            f"{url}/api/v1/envs/local/bad_manifest/deprecate",
            headers={"Authorization": "Bearer m41nt"},
            json={"actor": "alice", "reason": "superseded by echo", "successor": "local/echo_env"},
        )
        assert deprecated.status_code == 200, deprecated.text
        third.goto(url + "/?panel=site&env=local/bad_manifest")
        expect(third.locator("#oe-deprecated")).to_contain_text(
            "Deprecated (superseded by echo). Use local/echo_env instead."
        )
        expect(third.locator("#oe-health")).to_contain_text("not polled yet")  # a local env has no runtime to poll
        third.get_by_role("tab", name="History").click()
        events = third.locator("#oe-events tr")
        expect(events.nth(1)).to_contain_text("deprecated")
        expect(events.nth(1)).to_contain_text("alice")
        expect(third.locator("#oe-events")).to_contain_text("indexed")
        expect(third.locator("#oe-events")).to_contain_text("failed")
        third.locator("#oe-deprecated a").click()
        expect(third.locator("#oe-env-title")).to_have_text("local/echo_env")
        third.goto(url + "/?panel=site")
        expect(third.locator("a.oe-card[data-env='local/bad_manifest']")).to_contain_text("deprecated")
