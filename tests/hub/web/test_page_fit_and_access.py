"""The website as a visitor on a phone (390 px) or a desktop (1280 px) meets it, in Chromium, on
one Hub for the whole module (echo_env and blackjack_env, each with a leaderboard whose model name
is long):

- the action has one source of truth: with "Edit the action as JSON" ticked, the form is off and
  says so (nothing typed there can be dropped), the JSON is what is played, and each fills the
  other when the box is switched;
- no page scrolls sideways; a table or block too wide for its place scrolls inside itself instead
  of being cut off or pushing the page; no cell's content runs over its neighbour's; no word that
  would fit on a line is broken in the middle ("echoed_mess age");
- every text, placeholders included, has a contrast of at least 4.5:1; every control reached
  with the Tab key shows a focus ring; the env's picture has the env's own words as its text;
  the env page has one <h1>; "How to use" names the address the Hub was reached at.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from hub_service.app import create_app
from hub_service.db import sessionmaker_for
from hub_service.evals.service import record_eval
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from tests.hub.conftest import truncate
from tests.hub.web.conftest import mark_passed
from tests.support.servers import ROOT, serve_app

# In scripts/test's page run (two page tests at a time, nothing else beside), for CPU: tests/support/browser.py.
pytestmark = [pytest.mark.slow, pytest.mark.pages]

ENVS = ("echo_env", "blackjack_env")
WIDTHS = [1280, 390]
LONG_MODEL = "a-fine-tuned-model-with-a-rather-long-name-" * 3 + "v2"


@pytest.fixture(scope="module")
def hub(_databases: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Hub for the module's tests (each Hub start and env server start costs seconds), on its
    own emptied SQLite database; the envs are marked passed as the process builder would mark them
    (the pipeline is tests/hub/test_pipeline.py's subject), with their READMEs and a leaderboard."""
    url = _databases.url("sqlite")
    engine = _databases.engine(url)
    truncate(engine)
    factory = sessionmaker_for(engine)
    tmp = tmp_path_factory.mktemp("fit")
    root = tmp / "envs"
    for name in ENVS:
        shutil.copytree(ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    # public_url is left unset: the Hub must name the address it is reached at, not its default's port
    settings = HubSettings(
        data_dir=tmp / "hubdata",
        database_url=url,
        local_source=str(root),
        builder="process",
        play_instance_linger_s=300.0,
        rate_web_burst=5000,
        rate_web_per_minute=5000,
    )
    index_source(factory, LocalSource(root, trusted=True))
    with factory.begin() as db:
        for env, version in mark_passed(db, root, readme=True):
            record_eval(db, env, version, source="baseline", model="random", returns=[0.4, 0.5, 0.6])
            record_eval(
                db,
                env,
                version,
                source="cli",
                model=LONG_MODEL,
                returns=[1.0, 2.0],
                submitted_by="someone-with-a-long-handle",
                endpoint="https://inference.example.com/v1",
            )
    with pytest.MonkeyPatch.context() as env_vars:
        env_vars.setenv("UV_OFFLINE", "1")  # env venvs come from uv's cache: no index is reached
        with serve_app(create_app(settings, run_migrations=False)) as base:
            yield base
    truncate(engine)


def _catalog(new_page: Any, hub: str, width: int) -> Any:
    """A new visitor's page at `width`, on the catalog."""
    page = new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(hub + "/")
    expect(page.locator("a.oe-card")).to_have_count(len(ENVS))
    return page


def _env_page(page: Any, hub: str, env: str, width: int) -> Any:
    """Open an env's page at `width`; returns its framed play panel (a frame locator)."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{hub}/envs/local/{env}")
    expect(page.locator("#oe-env-title")).to_have_text(f"local/{env}")
    panel = page.frame_locator("#oe-panel")
    expect(panel.locator("#oe-play-reset")).to_be_visible()
    return panel


def _reset(panel: Any) -> None:
    panel.locator("#oe-play-reset").click()
    expect(panel.locator("#oe-steps")).to_have_text("0", timeout=90_000)  # the env's server starts on first play


def _said(found: dict[str, list[str]]) -> str:
    return "\n".join(f"{where}:\n  " + "\n  ".join(items) for where, items in found.items())


def _step(panel: Any, steps: int, echoed: str) -> None:
    """Press Step; the episode is at `steps` steps and its observation holds `echoed`."""
    panel.locator("#oe-play-step").click()
    expect(panel.locator("#oe-steps")).to_have_text(str(steps), timeout=30_000)
    expect(panel.locator("#oe-play-observation")).to_contain_text(echoed)


def _framed(page: Any) -> Any:
    """The panel's document, for measuring in it."""
    return page.locator("#oe-panel").element_handle().content_frame()


# -- issue 50, item 3: one source of truth for the action ------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_with_the_json_editor_on_the_form_is_off_and_says_so_and_the_json_is_what_is_played(
    hub: str, new_page: Any, width: int
) -> None:
    page = new_page()
    panel = _env_page(page, hub, "echo_env", width)
    _reset(panel)
    message = panel.locator("#oe-field-message textarea, #oe-field-message input").first
    json_mode = panel.locator("#oe-play-json-mode input")
    editor = panel.locator("#oe-play-json .cm-content")
    note = panel.locator("#oe-play-form-off")

    message.fill("from the form")
    expect(note).to_be_hidden()
    json_mode.check()
    expect(editor).to_contain_text('"message": "from the form"')
    # the form cannot be typed in while the JSON is the action, and the panel says why
    expect(message).to_be_disabled()
    expect(note).to_be_visible()
    expect(note).to_contain_text("Untick the box to use the form")
    editor.fill('{"message": "from the json"}')
    _step(panel, 1, "from the json")

    # back to the form: it shows what the JSON held, takes typing again, and that is what is played
    json_mode.uncheck()
    expect(panel.locator("#oe-play-json")).to_be_hidden()
    expect(note).to_be_hidden()
    expect(message).to_be_enabled()
    expect(message).to_have_value("from the json")
    message.fill("typed in the form")
    _step(panel, 2, "typed in the form")
    expect(panel.locator("#oe-history")).to_contain_text("typed in the form")
    json_mode.check()
    expect(editor).to_contain_text('"message": "typed in the form"')
    expect(message).to_be_disabled()


# -- issue 50, item 7: nothing scrolls sideways, nothing is cut off, no word broken ----------------

# What sticks out in one document: the page wider than its screen; a box running past the edge of
# what holds it when that holder cuts it off instead of scrolling; a table cell whose content runs
# over its neighbour's.
_OVERFLOW = """() => {
  const out = [], W = document.documentElement.clientWidth;
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\\s+/).slice(0, 2).join(".") : "");
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const wide = document.documentElement.scrollWidth - W;
  if (wide > 1) out.push(`the page is ${wide}px wider than the screen`);
  for (const e of document.querySelectorAll("body *")) {
    if (!shown(e) || getComputedStyle(e).position === "fixed") continue;
    let holder = e.parentElement;
    while (holder && holder !== document.body && getComputedStyle(holder).overflowX === "visible") holder = holder.parentElement;
    const clips = holder && holder !== document.body;
    const edge = clips ? holder.getBoundingClientRect().left + holder.clientLeft + holder.clientWidth : W;
    const right = e.getBoundingClientRect().right;
    if (right <= edge + 1) continue;
    if (clips && ["auto", "scroll"].includes(getComputedStyle(holder).overflowX)) continue;  // scrolls inside itself
    out.push(`${name(e)} ends ${Math.round(right - edge)}px past ${clips ? name(holder) + ", which cuts it off" : "the screen"}`);
  }
  for (const cell of document.querySelectorAll("td, th")) {
    if (shown(cell) && cell.scrollWidth > cell.clientWidth + 1)
      out.push(`${name(cell)} "${cell.textContent.slice(0, 30)}" runs ${cell.scrollWidth - cell.clientWidth}px over its neighbour`);
  }
  return [...new Set(out)].slice(0, 12);
}"""

# Words broken in the middle although they are narrower than half the screen (a word that long fits
# any line; a longer token, a 300-letter message say, may break where it must). A break after or
# before punctuation (snake_case at "_", a date at "-", a path at "/") is not mid-word.
_BROKEN_WORDS = """() => {
  const out = [], half = document.documentElement.clientWidth / 2;
  const joints = new Set([..."-_/.,:;=@?&|+()[]{}<>\\"'·…—–"]);
  const probe = document.createElement("span");
  probe.style.cssText = "position:absolute;left:-99999px;top:0;white-space:pre;visibility:hidden";
  document.body.appendChild(probe);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const words = /\\S{2,}/g;
    for (let m = words.exec(node.data); m; m = words.exec(node.data)) {
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size < 2) continue;
      let before = null;
      for (let i = 0; i < m[0].length; i++) {
        range.setStart(node, m.index + i); range.setEnd(node, m.index + i + 1);
        const r = range.getClientRects()[0];
        if (!r) continue;
        const top = Math.round(r.top);
        if (before !== null && Math.abs(top - before) > 2 && !joints.has(m[0][i - 1]) && !joints.has(m[0][i])) {
          probe.style.font = getComputedStyle(node.parentElement).font;
          probe.textContent = m[0];
          if (probe.getBoundingClientRect().width <= half)
            out.push(`"${m[0].slice(0, i)}|${m[0].slice(i)}" in <${node.parentElement.tagName.toLowerCase()}>`);
          break;
        }
        before = top;
      }
    }
  }
  probe.remove();
  return out.slice(0, 12);
}"""


def _layout_problems(frame: Any) -> list[str]:
    """Wait a moment for late layout (Gradio lays out after load), then say what is wrong."""
    with contextlib.suppress(PlaywrightTimeout):  # what is still wrong is measured below, and said
        frame.wait_for_function(
            f"() => ({_OVERFLOW})().length === 0 && ({_BROKEN_WORDS})().length === 0", timeout=5_000
        )
    return [*frame.evaluate(_OVERFLOW), *frame.evaluate(_BROKEN_WORDS)]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways_tables_scroll_inside_themselves_and_no_word_is_broken(
    hub: str, new_page: Any, width: int
) -> None:
    page = _catalog(new_page, hub, width)
    found = {"catalog": _layout_problems(page)}

    panel = _env_page(page, hub, "blackjack_env", width)
    expect(page.locator("#oe-leaderboard")).to_contain_text(LONG_MODEL)
    found["env page with a leaderboard"] = _layout_problems(page)

    panel = _env_page(page, hub, "echo_env", width)
    _reset(panel)
    # a long message of words, then one token longer than any screen, as the action and observation
    message = "echoed_message message_length " * 12 + "x" * 300
    panel.locator("#oe-field-message textarea, #oe-field-message input").first.fill(message)
    _step(panel, 1, "echoed_message")
    expect(panel.locator("#oe-history")).to_contain_text("echoed_message")
    found["env page after a long step"] = _layout_problems(page)
    found["play panel after a long step"] = _layout_problems(_framed(page))
    panel.get_by_role("tab", name="Leaderboard").click()
    expect(panel.locator("#oe-leaderboard")).to_contain_text(LONG_MODEL)
    found["the panel's leaderboard"] = _layout_problems(_framed(page))

    page.goto(hub + "/?panel=site&env=local/echo_env")
    expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
    found["the whole Gradio site"] = _layout_problems(page)

    left = {where: problems for where, problems in found.items() if problems}
    assert left == {}, _said(left)


# -- issue 50, item 9: contrast, focus, alt text, headings, the Hub's address ----------------------

# Each visible text (and each shown placeholder) whose contrast with what lies behind it is under
# 4.5:1. Colours are blended with their alpha and their boxes' opacity over the nearest opaque
# background; text on a background image cannot be measured here (axe-core's test covers it), nor
# can a disabled control's, which WCAG leaves out.
_LOW_CONTRAST = """() => {
  const rgba = c => { const m = /rgba?\\(([^)]+)\\)/.exec(c || ""); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const over = (f, b) => ({r: f.r * f.a + b.r * (1 - f.a), g: f.g * f.a + b.g * (1 - f.a), b: f.b * f.a + b.b * (1 - f.a), a: 1});
  const lum = c => { const f = v => (v /= 255) <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const behind = e => {
    const layers = [];
    for (let a = e; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.backgroundImage !== "none") return null;
      const c = rgba(s.backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    return layers.reverse().reduce((b, c) => over(c, b), {r: 255, g: 255, b: 255, a: 1});
  };
  const opacity = e => { let o = 1; for (let a = e; a; a = a.parentElement) o *= Number(getComputedStyle(a).opacity); return o; };
  const off = e => !!e.closest(":disabled, [aria-disabled=true], [inert]");
  const out = [];
  const check = (e, color, what) => {
    const bg = behind(e), fg = rgba(color);
    if (!bg || !fg) return;
    const c = ratio(over({...fg, a: fg.a * opacity(e)}, bg), bg);
    if (c < 4.5) out.push(`${what}: ${c.toFixed(2)}:1`);
  };
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    if (r.width < 2 || r.height < 2 || s.visibility !== "visible" || off(e) || e.closest("svg")) continue;
    const text = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join("").trim();
    if (text) check(e, s.color, `"${text.slice(0, 40)}"`);
    if ((e.tagName === "INPUT" || e.tagName === "TEXTAREA") && e.placeholder && !e.value)
      check(e, getComputedStyle(e, "::placeholder").color, `placeholder "${e.placeholder.slice(0, 40)}"`);
  }
  return [...new Set(out)].slice(0, 12);
}"""

# The control that has the keyboard's focus (inside the framed panel too) and whether a ring shows
# it: the browser's own, or an outline or box-shadow ring at least 2 px wide and of 3:1 contrast
# with the background.
_FOCUSED = """async () => {
  let doc = document, e = doc.activeElement;
  while (e && e.tagName === "IFRAME" && e.contentDocument) { doc = e.contentDocument; e = doc.activeElement; }
  if (!e || e === doc.body) return null;
  await Promise.all(e.getAnimations().map(a => a.finished.catch(() => null)));  // as it looks once its transitions end
  const win = doc.defaultView, s = win.getComputedStyle(e);
  const rgba = c => { const m = /rgba?\\(([^)]+)\\)/.exec(c || ""); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => (v /= 255) <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  let bg = {r: 255, g: 255, b: 255};
  for (let a = e.parentElement; a; a = a.parentElement) { const c = rgba(win.getComputedStyle(a).backgroundColor); if (c && c.a >= 1) { bg = c; break; } }
  const seen = c => c && c.a >= 0.9 && (Math.max(lum(c), lum(bg)) + 0.05) / (Math.min(lum(c), lum(bg)) + 0.05) >= 3;
  // "auto" is the browser's own ring (two colours, seen on any background)
  const outline = s.outlineStyle === "auto" || (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2 && seen(rgba(s.outlineColor)));
  const shadow = (s.boxShadow.match(/rgba?\\([^)]+\\)[^,]*/g) || []).some(part => {
    const px = (part.match(/-?[\\d.]+px/g) || []).map(parseFloat);
    return px.length >= 4 && px[3] >= 2 && seen(rgba(part));
  });
  const label = (e.getAttribute("aria-label") || e.textContent || e.getAttribute("placeholder") || "").trim().slice(0, 30);
  return {what: `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""} "${label}"`, id: e.id, ring: outline || shadow};
}"""


def _unringed_controls(page: Any, most: int = 70) -> tuple[list[str], list[str]]:
    """Tab through the page from its top: (the controls reached, those that showed no ring)."""
    page.locator("body").click(position={"x": 1, "y": 1})
    reached: list[str] = []
    bare: list[str] = []
    for _ in range(most):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if focused is None:
            continue
        if reached and focused["what"] == reached[0]:
            break  # round the page once
        reached.append(focused["what"])
        if not focused["ring"]:
            bare.append(focused["what"])
    return reached, sorted(set(bare))


@pytest.mark.parametrize("width", WIDTHS)
def test_text_contrast_focus_rings_picture_words_one_h1_and_the_hubs_own_address(
    hub: str, new_page: Any, width: int
) -> None:
    page = _catalog(new_page, hub, width)
    low = {"catalog": page.evaluate(_LOW_CONTRAST)}

    panel = _env_page(page, hub, "blackjack_env", width)
    # the README's own title is not a second <h1>: the env's id is the page's one
    assert page.locator("h1").all_inner_texts() == ["local/blackjack_env"]
    expect(page.locator("#readme")).to_contain_text("One hand of classic blackjack")
    # "How to use" names the Hub where it was reached, not the default address's port
    usage = page.locator("#use + pre")
    expect(usage).to_contain_text(f"OPENENV_HUB_URL={hub}")
    assert ":7860" not in usage.inner_text()
    # the episode options' placeholder (it names the env's own options) is read at 4.5:1 or more
    expect(panel.locator("#oe-play-options textarea, #oe-play-options input").first).to_have_attribute(
        "placeholder", re.compile(r"\w")
    )
    low["env page"] = page.evaluate(_LOW_CONTRAST)
    low["play panel before reset"] = _framed(page).evaluate(_LOW_CONTRAST)

    reached, bare = _unringed_controls(page)
    assert any("#oe-play-reset" in what for what in reached), reached
    assert bare == [], f"no focus ring on: {bare}"

    _reset(panel)
    # the picture's text is the env's own words for what it shows (blackjack's table in words)
    picture = panel.locator("#oe-play-frame img.oe-frame")
    expect(picture).to_be_visible()
    words = panel.locator("#oe-play-observation tr", has=page.locator("th", has_text=re.compile(r"^text$")))
    said = " ".join(words.locator("td").inner_text().split())
    assert "Your hand:" in said, said
    assert picture.get_attribute("alt") == said
    low["play panel mid-episode"] = _framed(page).evaluate(_LOW_CONTRAST)

    left = {where: texts for where, texts in low.items() if texts}
    assert left == {}, _said(left)
