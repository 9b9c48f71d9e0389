"""Every bundled env played to the end of an episode by clicking (and pressing keys) in the Hub
website, in headless Chromium at desktop (1280 px) and phone (390 px) sizes: the env's picture
first, one button per legal action or a form for free-form actions, Step disabled once the episode
is over, text that wraps, every tab reachable on a phone; a model try that cannot reach its model
stops at once with one clear line, and a trajectory shows the env's pictures. The catalog's search
finds an env by the words of its openenv.yaml.

Screenshots of each env at each size are kept under test-artifacts/play/ (CI keeps the folder).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from hub_service.app import create_app
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from tests.hub.web.conftest import mark_passed
from tests.support.browser import ARTIFACTS
from tests.support.openai_standin import openai_standin
from tests.support.servers import ROOT, serve_app

# The database is not the subject here (the catalog and play tests run on both backends).
# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.pages,
    pytest.mark.parametrize("db_url", ["sqlite"], indirect=True),
]

BUNDLED = ("blackjack_env", "grid_world_env", "chess_env", "atari_env", "wordle_env", "coding_env", "echo_env")
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
SHOTS = ARTIFACTS / "play"
TOKEN = "sk-play-envs-789"


@pytest.fixture()
def bundled_settings(clean_factory: sessionmaker[Session], hub_settings: HubSettings) -> Iterator[HubSettings]:
    """A Hub whose catalog holds every bundled env, played from its folder (no image to build).

    Each revision is marked passed as the pipeline's process builder would mark it: the pipeline
    is the subject of tests/hub/test_pipeline.py, and running it on seven envs here would cost
    minutes for nothing this test looks at.
    """
    settings = hub_settings.model_copy(
        update={
            "builder": "process",
            "play_instance_linger_s": 300.0,
            "play_max_instances": len(BUNDLED) + 1,
            "play_max_sessions": 32,
            "play_max_sessions_per_visitor": 16,
            "play_visitor_share": 1.0,
            "rate_play_burst": 200,
            "rate_model_burst": 50,
            "rate_web_burst": 5000,
            "rate_web_per_minute": 5000,
        }
    )
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    for name in BUNDLED:
        shutil.copytree(
            ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv", "*.pyc")
        )
    index_source(clean_factory, LocalSource(root, trusted=True))
    with clean_factory.begin() as db:
        mark_passed(db, root)
    yield settings


def _shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _field(page: Page, name: str) -> Any:
    return page.locator(f"#oe-field-{name} textarea, #oe-field-{name} input").first


def _reset(page: Page, url: str, env: str, options: dict[str, Any], seed: int = 1) -> None:
    page.goto(f"{url}/?panel=site&env=local/{env}")
    expect(page.locator("#oe-env-title")).to_have_text(f"local/{env}")
    page.get_by_role("tab", name="Play").click()
    page.locator("#oe-play-seed textarea, #oe-play-seed input").first.fill(str(seed))
    page.locator("#oe-play-options textarea, #oe-play-options input").first.fill(json.dumps(options))
    page.click("#oe-play-reset")
    expect(page.locator("#oe-steps")).to_have_text("0", timeout=90_000)  # the env's server starts on first play
    # the picture comes first: an image, or the env's text as text
    expect(page.locator("#oe-play-frame .oe-picture .oe-frame")).to_be_visible()
    expect(page.locator("#oe-play-error")).to_have_text("")


def _steps(page: Page) -> int:
    return int(page.locator("#oe-steps").inner_text())


def _over(page: Page) -> bool:
    return page.locator("#oe-play-over").count() > 0


def _play_until_over(page: Page, move: Callable[[], None], most: int = 12) -> int:
    """Make moves until the episode is over; returns how many were made."""
    for made in range(1, most + 1):
        before = _steps(page)
        move()
        expect(page.locator("#oe-steps")).not_to_have_text(str(before))
        if _over(page):
            return made
    raise AssertionError(f"the episode was not over after {most} moves")


def _first_choice(page: Page) -> Any:
    return page.locator("#oe-play-choices button:enabled").first


def _press_first_key(page: Page) -> None:
    classes = _first_choice(page).get_attribute("class") or ""
    key = next(c.removeprefix("oe-key-") for c in classes.split() if c.startswith("oe-key-"))
    page.keyboard.press(key)


def _check_over(page: Page, buttons: bool) -> None:
    expect(page.locator("#oe-play-over")).to_have_text("episode over — reset to play again")
    expect(page.locator("#oe-done")).to_have_text("true")
    if buttons:
        expect(page.locator("#oe-play-choices button").first).to_be_disabled()
        assert page.locator("#oe-play-choices button:enabled").count() == 0
    else:
        expect(page.locator("#oe-play-step")).to_be_disabled()
    assert page.locator("#oe-play-error .oe-error").count() == 0


def _fits(page: Page) -> None:
    """Nothing is cut off at the right edge: the page is no wider than the screen."""
    wide = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page is {wide}px wider than the screen"


def _play_every_env(page: Page, url: str, size: str) -> None:
    keys = size == "desktop"  # a phone has no keyboard: it taps

    # blackjack: a hand ends when you stand ("s" on a keyboard)
    _reset(page, url, "blackjack_env", {})
    expect(page.locator("#oe-play-choices button")).to_have_count(2)
    expect(page.locator("#oe-play-choices")).to_contain_text("stand")
    _fits(page)
    if keys:
        page.keyboard.press("s")
        expect(page.locator("#oe-steps")).to_have_text("1")
    else:
        page.locator("#oe-play-choices button", has_text="stand").click()
    expect(page.locator("#oe-play-over")).to_be_visible()
    _check_over(page, buttons=True)
    _fits(page)
    _shot(page, f"{size}-blackjack_env")

    # grid world: arrow keys (or the buttons) until the goal, a pit, or the step limit
    _reset(page, url, "grid_world_env", {"max_steps": 3})
    expect(page.locator("#oe-play-choices button[class*='oe-key-Arrow']").first).to_be_visible()  # arrow keys play it
    _play_until_over(page, (lambda: _press_first_key(page)) if keys else (lambda: _first_choice(page).click()), most=3)
    _check_over(page, buttons=True)
    _shot(page, f"{size}-grid_world_env")

    # chess: one legal-move button per move; a two-ply game is a draw after the opponent's reply
    _reset(page, url, "chess_env", {"max_plies": 2})
    options_box = page.locator("#oe-play-options textarea, #oe-play-options input").first
    expect(options_box).to_have_attribute(
        "placeholder", re.compile(r'defaults: \{"opponent": "random".*"max_plies": 200')
    )
    expect(page.locator("#oe-play-choices button")).to_have_count(20)  # the opening position's legal moves
    expect(page.locator("#oe-play-choices button", has_text="e2e4")).to_be_visible()
    page.locator("#oe-play-choices button", has_text="e2e4").click()
    _check_over(page, buttons=True)
    expect(page.locator("#oe-play-history")).to_contain_text("e2e4")
    _fits(page)
    _shot(page, f"{size}-chess_env")

    # atari: one button per legal action, a short episode
    _reset(page, url, "atari_env", {"max_episode_frames": 12})
    expect(page.locator("#oe-play-frame img.oe-frame")).to_be_visible()
    expect(page.locator("#oe-play-choices")).to_contain_text("NOOP")
    if keys:
        _play_until_over(page, lambda: page.keyboard.press("n"), most=4)  # n: NOOP
    else:
        _play_until_over(page, lambda: _first_choice(page).click(), most=4)
    _check_over(page, buttons=True)
    _shot(page, f"{size}-atari_env")

    # wordle: a free-form guess in a form; one wrong guess ends a one-guess game
    _reset(page, url, "wordle_env", {"max_guesses": 1, "word": "crane"})
    _field(page, "guess").fill("plumb")
    assert page.locator("#oe-play-choices").count() == 0  # free-form: a form, no buttons
    page.click("#oe-play-step")
    _check_over(page, buttons=False)
    expect(page.locator("#oe-play-observation")).to_contain_text("crane")  # the answer, revealed
    _fits(page)
    _shot(page, f"{size}-wordle_env")

    # coding: code in, the terminal out
    _reset(page, url, "coding_env", {"max_steps": 1})
    _field(page, "code").fill("print('forty-two:', 6 * 7)")
    page.click("#oe-play-step")
    _check_over(page, buttons=False)
    expect(page.locator("#oe-play-frame")).to_contain_text("forty-two: 42")
    _shot(page, f"{size}-coding_env")

    # echo: a long unbroken message wraps instead of running off the screen
    _reset(page, url, "echo_env", {"max_steps": 1})
    _field(page, "message").fill("x" * 300)
    page.click("#oe-play-step")
    _check_over(page, buttons=False)
    _fits(page)
    _shot(page, f"{size}-echo_env")


def test_every_bundled_env_is_played_to_the_end_by_clicking_on_desktop_and_phone(
    bundled_settings: HubSettings, new_page: Any
) -> None:
    app = create_app(bundled_settings)
    with serve_app(app) as url:
        for size, viewport in SIZES.items():
            page = new_page()
            page.set_viewport_size(viewport)
            if size == "desktop":  # the catalog finds an env by a word of its openenv.yaml
                page.goto(url + "/?panel=site")
                expect(page.locator("a.oe-card")).to_have_count(len(BUNDLED))
                page.locator("#oe-search textarea, #oe-search input").first.fill("cards")
                expect(page.locator("a.oe-card")).to_have_count(1)
                expect(page.locator("a.oe-card")).to_contain_text("local/blackjack_env")
            page.goto(url + "/?panel=site&env=local/blackjack_env")
            if size == "phone":  # every tab is on screen, none behind an overflow menu
                for name in (
                    "Catalog",
                    "Environment",
                    "Overview",
                    "Checks",
                    "History",
                    "Play",
                    "Let a model try",
                    "Leaderboard",
                ):
                    tab = page.get_by_role("tab", name=name)
                    expect(tab).to_be_visible()
                    box = tab.bounding_box()
                    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] + 1, name
                page.get_by_role("tab", name="Let a model try").click()
                expect(page.locator("#oe-try-run")).to_be_visible()
                _shot(page, "phone-tabs")
            _play_every_env(page, url, size)
            # (a page left while it loads cannot preload its styles: that is the navigation, not a fault)
            faults = [e for e in new_page.errors if not e.startswith("Unable to preload CSS")]
            assert not faults, faults


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_model_that_cannot_be_asked_stops_the_try_at_once_and_trajectories_show_pictures(
    bundled_settings: HubSettings, new_page: Any
) -> None:
    standin = openai_standin(api_key=TOKEN, models={"tiny-model"}, replies=['{"direction": "up"}'])
    closed = f"http://127.0.0.1:{_closed_port()}/v1"
    with serve_app(standin) as llm:
        settings = bundled_settings.model_copy(update={"llm_allowed_endpoints": [f"{llm}/v1", closed]})
        with serve_app(create_app(settings)) as url:
            page = new_page()
            page.set_viewport_size(SIZES["phone"])
            page.goto(url + "/?panel=site&env=local/grid_world_env")
            page.get_by_role("tab", name="Let a model try").click()

            # the random baseline: its trajectory shows the grid after each step
            page.locator("#oe-try-seed textarea, #oe-try-seed input").first.fill("3")
            page.click("#oe-try-run")
            expect(page.locator("#oe-score")).to_contain_text("score", timeout=90_000)
            expect(page.locator("#oe-trajectory .oe-picture img.oe-frame").first).to_be_attached()
            assert page.locator("#oe-trajectory .oe-picture").count() >= 2  # the start and at least one step
            _fits(page)
            _shot(page, "phone-model-try-baseline")

            page.get_by_label("LLM (OpenAI-compatible endpoint)").check()
            cases = [
                (closed, "tiny-model", TOKEN, f"cannot reach the model endpoint at {closed}: connection refused"),
                (f"{llm}/v1", "tiny-model", "sk-wrong", f"the model endpoint at {llm}/v1 refused the token (HTTP 401)"),
                (
                    f"{llm}/v1",
                    "no-such-model",
                    TOKEN,
                    f"the model endpoint at {llm}/v1 has no model 'no-such-model' (HTTP 404)",
                ),
            ]
            for base, model, token, line in cases:
                page.locator("#oe-try-base-url textarea, #oe-try-base-url input").first.fill(base)
                page.locator("#oe-try-model textarea, #oe-try-model input").first.fill(model)
                page.locator("#oe-try-token input").fill(token)
                page.click("#oe-try-run")
                expect(page.locator("#oe-try-stopped")).to_contain_text(line, timeout=60_000)
                expect(page.locator("#oe-try-score")).not_to_contain_text("unusable answers")
                expect(page.locator("#oe-trajectory details.oe-step")).to_have_count(1)  # asked once, then stopped
            _shot(page, "phone-model-try-unreachable")
            asked = [r for r in standin.state.requests if r["path"].endswith("/chat/completions")]
            assert len(asked) == 2  # one request per try that reached it; none after the refusal
            assert TOKEN not in page.content()
