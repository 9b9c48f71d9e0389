"""Play every bundled env to the end of an episode by clicking (and typing, and pressing keys) in
its server's own /web page, at desktop (1280 px) and phone (390 px) width, in real Chromium.

Each env's picture comes first, finite action spaces are buttons, free-form ones the form; Step
and the buttons turn off when the episode is over, with "episode over — reset to play again".
A screenshot of each finished episode is kept under test-artifacts/web-play/.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from openenv import create_app
from tests.support.browser import ARTIFACTS
from tests.support.servers import serve_app

OVER = "episode over — reset to play again"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
SLOW_MS = 30_000  # a sandbox or a ROM loads at the first reset; a busy CI machine is slow
KEYS = {"↑": "ArrowUp", "↓": "ArrowDown", "←": "ArrowLeft", "→": "ArrowRight", "space": " "}
WASD = {"ArrowUp": "w", "ArrowDown": "s", "ArrowLeft": "a", "ArrowRight": "d"}


@dataclass
class Game:
    env: str  # folder under envs/
    classes: tuple[str, str, str]  # module under server/, env class, (models) action, observation
    options: str  # reset options typed into the page
    play: str  # "buttons", "keys" or "form"
    frame: str  # CSS selector of the picture once reset
    form: dict[str, str] = field(default_factory=dict)  # for "form": field id → text


GAMES = {
    "echo_env": Game(
        "echo_env",
        ("echo_environment", "EchoEnvironment", "EchoAction,EchoObservation"),
        '{"max_steps": 2}',
        "form",
        "#frame pre.oe-ansi",
        {"#field-message": "hello from a phone"},
    ),
    "coding_env": Game(
        "coding_env",
        ("coding_environment", "CodingEnvironment", "CodeAction,CodeObservation"),
        '{"max_steps": 1}',
        "form",
        "#frame pre.oe-ansi",
        {"#field-code": "print(6 * 7)"},
    ),
    "wordle_env": Game(
        "wordle_env",
        ("wordle_environment", "WordleEnvironment", "WordleAction,WordleObservation"),
        '{"word": "crane"}',
        "form",
        "#frame img.oe-frame",
        {"#field-guess": "crane"},
    ),
    "blackjack_env": Game(
        "blackjack_env",
        ("blackjack_environment", "BlackjackEnvironment", "BlackjackAction,BlackjackObservation"),
        '{"seed": 3}',
        "buttons",
        "#frame img.oe-frame",
    ),
    "chess_env": Game(
        "chess_env",
        ("chess_environment", "ChessEnvironment", "ChessAction,ChessObservation"),
        '{"max_plies": 6}',
        "buttons",
        "#frame img.oe-frame",
    ),
    "grid_world_env": Game(
        "grid_world_env",
        ("grid_environment", "GridWorldEnvironment", "GridAction,GridObservation"),
        '{"size": 4, "max_steps": 6, "seed": 7}',
        "keys",
        "#frame img.oe-frame",
    ),
    "atari_env": Game(
        "atari_env",
        ("atari_environment", "AtariEnvironment", "AtariAction,AtariObservation"),
        '{"game": "pong", "max_episode_frames": 24}',
        "keys",
        "#frame img.oe-frame",
    ),
}


def _app(game: Game) -> Any:
    module, env_cls, models = game.classes
    env = getattr(importlib.import_module(f"{game.env}.server.{module}"), env_cls)
    action, observation = (getattr(importlib.import_module(f"{game.env}.models"), n) for n in models.split(","))
    return create_app(env, action, observation, env_name=game.env, enable_web_interface=True)


@pytest.fixture()
def coding_limits(monkeypatch: pytest.MonkeyPatch) -> Any:
    from coding_env.server import settings as sandbox_settings

    monkeypatch.setenv("CODING_ENV_TIMEOUT_S", "5")
    sandbox_settings.get_settings.cache_clear()
    yield
    sandbox_settings.get_settings.cache_clear()


def _play_to_the_end(page: Any, game: Game) -> int:
    """Reset, then act until the page says the episode is over; returns the steps taken."""
    from playwright.sync_api import expect

    page.click("#reset-box summary")
    page.fill("#reset-options", game.options)
    page.click("#reset")
    page.locator("#reset").blur()  # keys go to the page, not a focused control
    expect(page.locator(game.frame)).to_be_visible(timeout=SLOW_MS)
    if game.frame.endswith("img.oe-frame"):  # a real picture, decoded by the browser
        page.wait_for_function("() => document.querySelector('#frame img').naturalWidth > 0")
    for turn in range(40):
        if page.locator("#over").is_visible():
            return turn
        before = page.locator("#steps").inner_text()
        if game.play == "form":
            expect(page.locator("#choices")).to_be_hidden()
            for selector, text in game.form.items():
                page.fill(selector, text)
            page.click("#step")
        else:
            buttons = page.locator("#choices button.choice:enabled")
            expect(buttons.first).to_be_visible()
            expect(page.locator("#custom")).not_to_have_attribute("open", "")
            if game.play == "keys":  # a key shown on a button, as a person would press it (WASD too)
                marks = page.locator("#choices button.choice:enabled kbd").all_inner_texts()
                assert marks, "direction-like actions get keys"
                key = KEYS.get(marks[turn % len(marks)], marks[turn % len(marks)])
                page.keyboard.press(WASD.get(key, key) if turn % 2 else key)
            else:  # "stand" ends a hand of blackjack; chess takes whatever move is first
                labels = buttons.all_inner_texts()
                page.locator("#choices button.choice", has_text="stand").click() if any(
                    "stand" in t for t in labels
                ) else buttons.first.click()
        try:
            expect(page.locator("#steps")).not_to_have_text(before, timeout=SLOW_MS)
        except AssertionError as e:
            said = {k: page.locator(k).inner_text() for k in ("#conn", "#error")}
            raise AssertionError(f"{game.env}: turn {turn} did not step; the page said {said}") from e
    raise AssertionError(f"{game.env}: no end after 40 turns")


@pytest.mark.parametrize("name", list(GAMES))
def test_play_each_bundled_env_to_the_end(name: str, new_page: Callable[..., Any], coding_limits: Any) -> None:
    from playwright.sync_api import expect

    game = GAMES[name]
    out = ARTIFACTS / "web-play"
    out.mkdir(parents=True, exist_ok=True)
    with serve_app(_app(game)) as url:
        for size, (width, height) in WIDTHS.items():
            page = new_page()
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{url}/web")
            turns = _play_to_the_end(page, game)
            assert turns >= 1
            expect(page.locator("#over")).to_have_text(OVER)
            expect(page.locator("#step")).to_be_disabled()
            assert page.locator("#choices button.choice:enabled").count() == 0
            expect(page.locator("#done")).to_have_text("true")
            expect(page.locator("#frame")).to_have_attribute("data-steps", str(turns))  # the final picture
            # the picture leads the page and nothing is cut off at the right edge
            frame_box = page.locator("#frame").bounding_box()
            assert frame_box is not None and frame_box["x"] + frame_box["width"] <= width + 1
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width, (
                f"{name} overflows at {width} px"
            )
            page.screenshot(path=str(out / f"{name}-{size}.png"), full_page=True)
            # another episode starts from the same page
            page.click("#reset")
            expect(page.locator("#over")).to_be_hidden()
            expect(page.locator("#step")).to_be_enabled()
    assert not new_page.errors


def test_env_errors_are_shown_in_the_envs_words(new_page: Callable[..., Any]) -> None:
    from playwright.sync_api import expect

    with serve_app(_app(GAMES["echo_env"])) as url:
        page = new_page()
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{url}/web")
        page.click("#reset-box summary")
        page.fill("#reset-options", '{"max_steps": -1}')
        page.click("#reset")
        error = page.locator("#error")
        expect(error).to_contain_text(
            "The environment could not reset: ValueError: max_steps must be a positive integer"
        )
        assert "127.0.0.1" not in error.inner_text() and "EXECUTION_ERROR" not in error.inner_text()
        page.fill("#reset-options", "")
        page.click("#reset")
        expect(error).to_be_empty()
        expect(page.locator("#frame pre.oe-ansi")).to_contain_text("Echo environment ready!")
    assert not new_page.errors


def test_a_picture_that_fails_is_reported_and_the_buttons_still_play(new_page: Callable[..., Any]) -> None:
    from grid_world_env.models import GridAction, GridObservation
    from grid_world_env.server.grid_environment import GridWorldEnvironment
    from playwright.sync_api import expect

    class Smudged(GridWorldEnvironment):
        def render(self) -> Any:
            raise RuntimeError("the pen broke at http://127.0.0.1:9/internal")

    with serve_app(create_app(Smudged, GridAction, GridObservation, enable_web_interface=True)) as url:
        page = new_page()
        page.goto(f"{url}/web")
        page.click("#reset")
        expect(page.locator("#error")).to_have_text(
            "The environment could not draw itself: RuntimeError: the pen broke at the server"
        )
        expect(page.locator("#frame")).to_be_hidden()
        page.locator("#choices button.choice").first.click()
        expect(page.locator("#steps")).to_have_text("1")
    assert not new_page.errors
