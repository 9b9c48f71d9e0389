"""The env page's leaderboard in headless Chromium: the random baseline is there from the start; a
model's "let a model try" run appears beside it as soon as the run ends (host shown, token never);
a try whose model could not be used at all adds nothing; a yanked revision's rows are marked."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.evals.models import Eval
from hub_service.evals.service import record_eval
from hub_service.settings import HubSettings
from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages]
TOKEN = "sk-board-secret-789"
HOSTILE = '<img src=x onerror="window.__pwned=1">'


def _seed(factory) -> None:
    """The random baseline of echo_env's passing revision (the pipeline records it from its reward
    check; recorded here only if this pipeline run did not), and a submitted run whose model name
    and submitter try to run script in visitors' browsers."""
    with factory.begin() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "echo_env"))
        version = s.get(EnvVersion, env.latest_version_id)
        if s.scalar(select(Eval.id).where(Eval.version_id == version.id, Eval.source == "baseline")) is None:
            record_eval(s, env, version, source="baseline", model="random", returns=[0.4, 0.5, 0.6])
        record_eval(
            s,
            env,
            version,
            source="cli",
            model=HOSTILE,
            returns=[-5.0, -4.0],
            submitted_by="<b>mallory</b>",
            endpoint="http://evil.example/v1",
        )


def _website_runs(factory) -> list[Eval]:
    with factory() as s:
        return list(s.scalars(select(Eval).where(Eval.source == "website")).all())


def _try(page, base_url: str, model: str) -> None:
    page.get_by_role("tab", name="Let a model try").click()
    page.get_by_label("LLM (OpenAI-compatible endpoint)").check()
    page.locator("#oe-try-base-url textarea, #oe-try-base-url input").first.fill(base_url)
    page.locator("#oe-try-model textarea, #oe-try-model input").first.fill(model)
    page.locator("#oe-try-token input").fill(TOKEN)
    page.click("#oe-try-run")


def test_a_model_try_joins_the_leaderboard_beside_the_random_baseline(
    web_settings: HubSettings, clean_factory, new_page
) -> None:
    _seed(clean_factory)
    standin = openai_standin(api_key=TOKEN, models={"tiny-model"}, replies=['{"message": "hello"}'])
    with serve_app(standin) as llm:
        settings = web_settings.model_copy(update={"llm_allowed_endpoints": [f"{llm}/v1"]})
        with serve_app(create_app(settings, run_migrations=False)) as url:
            page = new_page()
            page.goto(url + "/?panel=site&env=local/echo_env")
            expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
            page.get_by_role("tab", name="Leaderboard").click()
            rows = page.locator("#oe-leaderboard tr[data-model]")
            expect(rows).to_have_count(2)
            expect(page.locator("#oe-leaderboard tr[data-source='baseline']")).to_contain_text("random")
            hostile = page.locator("#oe-leaderboard tr[data-source='cli']")
            expect(hostile).to_contain_text(HOSTILE)  # shown as text, inert
            expect(hostile).to_contain_text("by <b>mallory</b>")
            assert page.locator("#oe-leaderboard img, #oe-leaderboard b:text-is('mallory')").count() == 0

            # a model that cannot be used at all (no such model at the endpoint) adds nothing
            _try(page, f"{llm}/v1", "no-such-model")
            expect(page.locator("#oe-try-stopped")).to_contain_text(
                "has no model 'no-such-model' (HTTP 404)", timeout=60_000
            )
            expect(page.locator("#oe-trajectory")).to_contain_text("HTTP 404")
            assert _website_runs(clean_factory) == []

            # a model that plays is on the board when its run ends, without reloading the page
            _try(page, f"{llm}/v1", "tiny-model")
            expect(page.locator("#oe-trajectory")).to_contain_text("hello", timeout=60_000)
            expect(page.locator("#oe-score")).to_contain_text("score", timeout=60_000)
            page.get_by_role("tab", name="Leaderboard").click()
            expect(rows).to_have_count(3, timeout=15_000)
            ours = page.locator("#oe-leaderboard tr[data-source='website']")
            host = llm.split("//")[1]
            expect(ours).to_contain_text("tiny-model")
            expect(ours).to_contain_text(host)
            expect(ours).to_contain_text("website try")
            expect(page.locator("#oe-leaderboard tr[data-source='baseline']")).to_contain_text("random")
            assert TOKEN not in page.content()
            stored = _website_runs(clean_factory)
            assert [(e.model, e.endpoint_host, e.submitted_by) for e in stored] == [("tiny-model", host, None)]
            api = httpx.get(f"{url}/api/v1/envs/local/echo_env/leaderboard").json()["entries"]
            assert sorted(e["source"] for e in api) == ["baseline", "cli", "website"]
            assert [e["mean_return"] for e in api] == sorted((e["mean_return"] for e in api), reverse=True)

            # a maintainer yanks the revision: its rows stay, marked
            with clean_factory.begin() as s:
                s.get(EnvVersion, stored[0].version_id).yanked = True
            page.goto(url + "/?panel=site&env=local/echo_env")
            page.get_by_role("tab", name="Leaderboard").click()
            expect(page.locator("#oe-leaderboard tr.oe-yanked")).to_have_count(3)
            expect(ours).to_contain_text("yanked")
            assert page.evaluate("() => window.__pwned === undefined")
