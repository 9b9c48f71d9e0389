"""The play panel as a visitor on a phone (390 px) or a desktop (1280 px) meets it, in Chromium, on
one Hub for the whole module (echo_env, blackjack_env and grid_world_env):

- the panel fits its content: its frame grows and shrinks with it (one scrollbar, the page's),
  and after Reset on a phone the picture and the action buttons are on the screen;
- every key press and click is played in order or refused in words: keys pressed while a move is
  played wait in a queue (its count shown) and all are played; a key with no legal move now says
  so and plays nothing; a move that changed nothing says so;
- errors stand beside the control that caused them, in plain words (bad JSON under Step); a
  session that ended is shown ended, its controls off, with one button that starts again; a
  reload resumes the episode; a panel whose app fails to load says so and loads again.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from hub_service.app import create_app
from hub_service.db import sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.play.errors import describe_env_failure
from hub_service.settings import HubSettings
from tests.hub.conftest import truncate
from tests.hub.web.conftest import mark_passed
from tests.support.browser import ARTIFACTS
from tests.support.servers import ROOT, serve_app

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages]

ENVS = ("echo_env", "blackjack_env", "grid_world_env")
WIDTHS = [1280, 390]
IDLE_S = 10.0  # play_idle_timeout_s of this module's Hub: short, for the expired session's test
GRID = '{"size": 5, "walls": 0, "pits": 0}'  # open floor: every move but off the edge is legal
SHOTS = ARTIFACTS / "panel"  # the pictures in docs/website.md are these (CI keeps the folder)
OPPOSITE = {"ArrowUp": "ArrowDown", "ArrowDown": "ArrowUp", "ArrowLeft": "ArrowRight", "ArrowRight": "ArrowLeft"}


@pytest.fixture(scope="module")
def hub(_databases: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Hub for the module (each Hub and env server start costs seconds), on its own emptied
    SQLite database; the envs are marked passed as the process builder would mark them."""
    url = _databases.url("sqlite")
    engine = _databases.engine(url)
    truncate(engine)
    factory = sessionmaker_for(engine)
    tmp = tmp_path_factory.mktemp("panel")
    root = tmp / "envs"
    for name in ENVS:
        shutil.copytree(ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    settings = HubSettings(
        data_dir=tmp / "hubdata",
        database_url=url,
        local_source=str(root),
        builder="process",
        play_instance_linger_s=300.0,
        play_idle_timeout_s=IDLE_S,
        rate_web_burst=5000,
        rate_web_per_minute=5000,
        rate_play_burst=5000,
        rate_play_per_minute=5000,
    )
    index_source(factory, LocalSource(root, trusted=True))
    with factory.begin() as db:
        mark_passed(db, root)
    with pytest.MonkeyPatch.context() as env_vars:
        env_vars.setenv("UV_OFFLINE", "1")  # env venvs come from uv's cache: no index is reached
        with serve_app(create_app(settings, run_migrations=False)) as base:
            yield base
    truncate(engine)


def _open(page: Any, hub: str, env: str, width: int, height: int = 844) -> Any:
    """Open an env's page at `width`; returns its framed play panel (a frame locator)."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{hub}/envs/local/{env}")
    panel = page.frame_locator("#oe-panel")
    expect(panel.locator("#oe-play-reset")).to_be_visible(timeout=30_000)
    return panel


def _reset(panel: Any, options: str = "", seed: str = "") -> None:
    if options:
        panel.locator("#oe-play-options textarea, #oe-play-options input").first.fill(options)
    if seed:
        panel.locator("#oe-play-seed textarea, #oe-play-seed input").first.fill(seed)
    panel.locator("#oe-play-reset").click()
    expect(panel.locator("#oe-steps")).to_have_text("0", timeout=90_000)  # the env's server starts on first play


def _frame(page: Any) -> Any:
    return page.locator("#oe-panel").element_handle().content_frame()


def _in_view(page: Any, locator: Any) -> bool:
    """Whether `locator` (in the panel) is all on the page's screen."""
    box = locator.bounding_box()  # in the page's coordinates, frame offset included
    view = page.viewport_size
    return (
        box is not None
        and box["y"] >= -1
        and box["y"] + box["height"] <= view["height"] + 1
        and box["x"] + box["width"] <= view["width"] + 1
    )


def _fits(page: Any) -> None:
    """The frame is as tall as the panel's content: nothing scrolls inside it, nothing is cut off."""
    frame = _frame(page)
    deadline = time.monotonic() + 10
    while True:
        inner = frame.evaluate(
            "() => ({scroll: document.scrollingElement.scrollHeight, view: innerHeight,"
            " content: Math.ceil(document.querySelector('.gradio-container').getBoundingClientRect().height)})"
        )
        if inner["scroll"] <= inner["view"] + 1 and inner["view"] - inner["content"] < 60:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the panel does not fit its frame: {inner}")
        time.sleep(0.2)


# -- issue 50, item 2: a panel that fits its content ------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_panel_frame_fits_its_content_and_after_reset_the_picture_and_buttons_are_on_the_screen(
    hub: str, new_page: Any, width: int
) -> None:
    page = new_page()
    panel = _open(page, hub, "blackjack_env", width)
    _fits(page)
    before = page.locator("#oe-panel").bounding_box()["height"]
    _reset(panel)
    _fits(page)  # it grew with the picture, the buttons and the observation: one scrollbar, the page's
    assert page.locator("#oe-panel").bounding_box()["height"] > before
    # the first screen after Reset shows the picture and the hit/stand buttons, whole
    expect(panel.locator("#oe-play-choices button").first).to_be_visible()
    for part in ("#oe-play-status", "#oe-play-frame", "#oe-play-choices"):
        assert _in_view(page, panel.locator(part)), f"{part} is not on the screen after Reset at {width} px"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"blackjack-after-reset-{width}.png"))  # the first screen, as seen
    # a free-form env: the form's Step button is reachable in the page's one scroll, never in the frame's
    page2 = new_page()
    panel2 = _open(page2, hub, "echo_env", width)
    _reset(panel2)
    _fits(page2)
    step = panel2.locator("#oe-play-step")
    step.scroll_into_view_if_needed()
    assert _in_view(page2, step)
    page2.screenshot(path=str(SHOTS / f"echo-env-page-{width}.png"), full_page=True)  # the frame as tall as the panel


# -- issue 50, item 4: input played in order or refused in words ------------------------------------


def _keys(panel: Any) -> set[str]:
    """The arrow keys that have a legal move now."""
    classes = panel.locator("#oe-play-choices button").evaluate_all("bs => bs.map(b => b.className)")
    return {m.group(1) for c in classes for m in [re.search(r"oe-key-(Arrow\w+)", c)] if m}


@pytest.mark.parametrize("width", WIDTHS)
def test_fast_key_presses_are_queued_and_all_played_in_order_and_an_illegal_one_is_refused(
    hub: str, new_page: Any, width: int
) -> None:
    page = new_page()
    panel = _open(page, hub, "grid_world_env", width)
    _reset(panel, GRID, seed="3")
    legal = _keys(panel)
    assert legal
    there = sorted(legal)[0]  # and back again, which is always legal: the way it came
    back = OPPOSITE[there]
    frame = _frame(page)
    frame.evaluate(
        """() => { window.__said = []; const line = document.querySelector('#oe-play-queue');
        if (line) new MutationObserver(() => window.__said.push(line.textContent)).observe(line, {childList: true, subtree: true, characterData: true}); }"""
    )
    panel.locator("#oe-play-frame").click()  # the keys go to the panel
    presses = [there, back] * 4
    for key in presses:  # as fast as a visitor drums: each before the last is answered
        page.keyboard.press(key)
    expect(panel.locator("#oe-steps")).to_have_text(str(len(presses)), timeout=60_000)
    said = frame.evaluate("() => window.__said")
    assert any(re.search(r"\d+ more queued", s) for s in said), said  # the queue was shown while it played
    moves = panel.locator("#oe-history tr:has(td)").all_inner_texts()
    assert len(moves) == len(presses)
    words = {"ArrowUp": "up", "ArrowDown": "down", "ArrowLeft": "left", "ArrowRight": "right"}
    assert [words[k] in m for k, m in zip(presses, moves, strict=True)] == [True] * len(presses), moves
    expect(panel.locator("#oe-play-queue")).to_be_empty()
    # walk to an edge: there, the key toward it has no legal move, and pressing it says so
    while there in _keys(panel):
        steps = int(panel.locator("#oe-steps").inner_text())
        page.keyboard.press(there)
        expect(panel.locator("#oe-steps")).to_have_text(str(steps + 1), timeout=30_000)
    steps = panel.locator("#oe-steps").inner_text()
    page.keyboard.press(there)
    expect(panel.locator("#oe-play-queue")).to_contain_text("not a legal move now")
    assert panel.locator("#oe-steps").inner_text() == steps  # nothing was played
    assert _in_view(page, panel.locator("#oe-play-queue")) or width == 390


# -- issue 50, item 5: errors beside their control; an ended session; a reload; a failed load ------------


@pytest.mark.parametrize("width", WIDTHS)
def test_a_bad_json_action_is_refused_in_plain_words_beside_the_step_button_and_a_no_op_is_told(
    hub: str, new_page: Any, width: int
) -> None:
    page = new_page()
    panel = _open(page, hub, "echo_env", width)
    _reset(panel)
    panel.locator("#oe-play-json-mode input").check()
    editor = panel.locator("#oe-play-json .cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type('{"message": ')
    panel.locator("#oe-play-step").click()
    said = panel.locator("#oe-play-step-error")
    expect(said).to_contain_text("not valid JSON")
    expect(said).to_contain_text("line 1")
    assert "Expecting value" not in said.inner_text()  # the parser's words, not the visitor's
    expect(panel.locator("#oe-play-error")).to_be_empty()  # not above the picture, out of view
    step, error = panel.locator("#oe-play-step").bounding_box(), said.bounding_box()
    assert 0 <= error["y"] - (step["y"] + step["height"]) < 120  # right under the Step button
    said.scroll_into_view_if_needed()
    assert _in_view(page, said)
    # fixed, it plays; the same action again changes nothing the visitor sees, and the panel says so
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type('{"message": "same words"}')
    for steps in (1, 2):
        panel.locator("#oe-play-step").click()
        expect(panel.locator("#oe-steps")).to_have_text(str(steps), timeout=30_000)
    expect(said).to_contain_text("changed nothing")


def test_an_env_failure_never_shows_a_server_address_whatever_its_host() -> None:
    from openenv.errors import EnvConnectionError, EnvServerError

    for url in ("ws://atari-env-7f3c:8000/ws", "http://172.17.0.4:8000", "host.docker.internal:8000"):
        failed = EnvServerError(f"the ALE could not load the ROM at {url}: try again", code="ENV_ERROR")
        words = describe_env_failure(failed)
        assert url not in words and "8000" not in words, words
        assert "the env's server" in words
    assert "127.0.0.1" not in describe_env_failure(EnvConnectionError("cannot reach http://127.0.0.1:5555/ws"))


def test_a_session_that_ended_is_shown_ended_with_its_controls_off_and_one_click_starts_again(
    hub: str, new_page: Any
) -> None:
    pages = []
    for width in WIDTHS:  # both widths wait out the one idle timeout together
        page = new_page()
        pages.append((page, _open(page, hub, "blackjack_env", width), width))
        _reset(pages[-1][1])
    time.sleep(IDLE_S + 1.5)
    for page, panel, width in pages:
        ended = panel.locator("#oe-play-expired")
        expect(ended).to_contain_text("session ended", timeout=10_000)
        buttons = panel.locator("#oe-play-choices button")
        assert buttons.count() >= 2 and all(b.is_disabled() for b in buttons.all()), width  # nothing looks live
        steps = panel.locator("#oe-steps").inner_text()
        page.keyboard.press("h")  # a key now is refused in words, not played nor lost unseen
        expect(panel.locator("#oe-play-queue")).to_contain_text("was not played")
        assert panel.locator("#oe-steps").inner_text() == steps
        restart = panel.locator("#oe-play-restart")
        restart.scroll_into_view_if_needed()
        assert _in_view(page, restart)
        restart.click()
        expect(panel.locator("#oe-play-expired")).to_have_count(0, timeout=60_000)
        expect(panel.locator("#oe-play-choices button").first).to_be_enabled()
        panel.locator("#oe-play-choices button").first.click()
        expect(panel.locator("#oe-steps")).not_to_have_text("0", timeout=30_000)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reload_mid_episode_resumes_the_episode(hub: str, new_page: Any, width: int) -> None:
    page = new_page()
    panel = _open(page, hub, "echo_env", width)
    _reset(panel)
    box = panel.locator("#oe-field-message textarea, #oe-field-message input").first
    for n, text in enumerate(("first words", "second words"), 1):
        box.fill(text)
        panel.locator("#oe-play-step").click()
        expect(panel.locator("#oe-steps")).to_have_text(str(n), timeout=30_000)
    page.reload()
    panel = page.frame_locator("#oe-panel")
    expect(panel.locator("#oe-steps")).to_have_text("2", timeout=30_000)
    expect(panel.locator("#oe-play-step-error")).to_contain_text("goes on where it was")
    expect(panel.locator("#oe-history")).to_contain_text("second words")
    box = panel.locator("#oe-field-message textarea, #oe-field-message input").first
    box.fill("third words")
    panel.locator("#oe-play-step").click()
    expect(panel.locator("#oe-steps")).to_have_text("3", timeout=30_000)
    expect(panel.locator("#oe-play-observation")).to_contain_text("third words")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_panel_that_fails_to_load_says_so_and_loads_again(hub: str, new_page: Any, width: int) -> None:
    page = new_page()
    failed: list[str] = []

    def first_fails(route: Any) -> None:
        if not failed:  # the app's script, lost once on the way (one panel in ten stayed blank)
            failed.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route(re.compile(r"/assets/index-[^/]*\.js$"), first_fails)
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(f"{hub}/envs/local/blackjack_env")
    panel = page.frame_locator("#oe-panel")
    expect(panel.locator("#oe-panel-failed")).to_contain_text("did not load", timeout=30_000)
    expect(panel.locator("#oe-panel-failed")).to_contain_text("Trying again")
    expect(panel.locator("#oe-play-reset")).to_be_visible(timeout=60_000)
    assert failed
    _reset(panel)
