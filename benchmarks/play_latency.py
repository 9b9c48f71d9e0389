"""Playing in the browser: from a visitor's key press or click to the env's new picture on screen.

    python benchmarks/play_latency.py [--steps 1000] [--envs atari_env,echo_env] [--widths 390,1280]
                                      [--quick] [--output PATH | --no-save] [--json]

A real Hub (uvicorn thread, SQLite, every bundled env published from its folder and played by the
Hub's process instances) and headless Chromium (Playwright, Debian's Chromium as the web tests use
it). For each env and each window width the Play panel is opened and Reset pressed, then `--steps`
steps are played with the panel's own controls, as a visitor would: a key when an action button
has one (at 1280 px; a phone has no keyboard), else a click on a random legal action's button, or
for free-form envs a guess, a program or a message typed into the form and a click on Step. An
episode that ends is reset (not timed) and play goes on.

Timed in the page's own clock: from the input event's timestamp to the frame after the panel shows
the new step (the step counter, the picture, decoded when it is an image). Per env and width: p50,
p90, p99, and the p50 of the first and the last 100 steps (flat over the run). Issue 50's target:
p50 at most 150 ms for every env at both widths, flat over 1,000 steps.

`--quick` (20 steps, for checking that it runs). Results: benchmarks/results/play_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _results
from _harness import ROOT, BenchmarkError, entry

NAME = "play_latency"
BUNDLED = ("blackjack_env", "grid_world_env", "chess_env", "atari_env", "wordle_env", "coding_env", "echo_env")
WIDTHS = {390: 844, 1280: 900}  # width: height (a phone, a desktop)
TARGET_MS = 150.0
EDGE = 100  # steps at each end of a run whose p50s show whether it stays flat
# Reset options that make episodes long (every one of these envs ends by itself sooner or later,
# and is then reset).
OPTIONS: dict[str, dict[str, Any]] = {
    "grid_world_env": {"pits": 0, "max_steps": 100_000},
    "chess_env": {"max_plies": 100_000, "max_illegal_moves": 100_000},
    "wordle_env": {"max_guesses": 20, "word": "crane"},
}
GUESSES = ("plumb", "slate", "audio", "fight", "morse", "chunk", "woken", "blitz", "dwarf", "pygmy")

# Installed in the page before its scripts: the time of each visitor input (its event's timestamp,
# captured before the page's own handlers), and for each new step shown (the counter or the
# picture changed) the time the next frame is drawn after it, once the picture is decoded when it
# is an image.
INSTRUMENT = """(() => {
  const st = window.__oeLatency = { input: null, shown: [], last: null };
  const mark = (event) => { if (!event.repeat) st.input = event.timeStamp; };
  addEventListener("keydown", mark, true);
  addEventListener("pointerdown", mark, true);
  addEventListener("click", (event) => { if (event.detail === 0) mark(event); }, true);  // a click without a pointer
  new MutationObserver(() => {
    const counter = document.getElementById("oe-steps");
    const steps = counter ? counter.textContent : null;
    const img = document.querySelector("#oe-play-frame img.oe-frame");
    const picture = document.querySelector("#oe-play-frame .oe-frame");
    // The counter and the picture: a reset to 0 steps shows a new picture even when it was 0 before.
    const seen = steps + "|" + (img ? img.getAttribute("src") : picture ? picture.textContent : "");
    if (steps === null || seen === st.last) return;
    st.last = seen;
    const input = st.input;
    const shown = () => requestAnimationFrame(() => { st.shown.push({ steps, input, at: performance.now() }); if (st.wake) st.wake(); });
    if (img && !img.complete) img.decode().then(shown, shown); else shown();
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();"""

# Resolves with the first step shown after `seen` entries whose counter reads `steps`; rejects
# with the panel's error when one appears instead, or after `ms`. Woken by each step shown (no
# busy polling: the page's CPU is what is measured); the error is looked for every 100 ms.
WAIT = """([seen, steps, ms]) => new Promise((resolve, reject) => {
  const st = window.__oeLatency, t0 = performance.now();
  let timer = null;
  const check = () => {
    const found = st.shown.slice(seen).find((s) => s.steps === String(steps));
    if (found) { st.wake = null; clearTimeout(timer); resolve({ ...found, count: st.shown.length }); return true; }
    return false;
  };
  const slow = () => {
    if (check()) return;
    const error = document.querySelector("#oe-play-error .oe-error");
    if (error && error.textContent.trim()) { st.wake = null; return reject(new Error("the panel said: " + error.textContent.trim())); }
    if (performance.now() - t0 > ms) { st.wake = null; return reject(new Error("no new step shown within " + ms + " ms")); }
    timer = setTimeout(slow, 100);
  };
  st.wake = check;
  slow();
})"""


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def summary(latencies: list[float]) -> dict[str, Any]:
    """p50/p90/p99 of one run, and the p50 of its first and last EDGE steps."""
    edge = min(EDGE, max(1, len(latencies) // 2))
    return {
        "steps": len(latencies),
        "p50_ms": round(statistics.median(latencies), 1),
        "p90_ms": round(_pct(latencies, 0.90), 1),
        "p99_ms": round(_pct(latencies, 0.99), 1),
        "first_p50_ms": round(statistics.median(latencies[:edge]), 1),
        "last_p50_ms": round(statistics.median(latencies[-edge:]), 1),
        "edge_steps": edge,
    }


@contextmanager
def hub(envs: list[str]) -> Iterator[str]:
    """A Hub on 127.0.0.1 whose catalog holds `envs`, published from their folders; yields its URL."""
    from hub_service.app import create_app
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from hub_service.indexer.sources import LocalSource
    from hub_service.settings import HubSettings
    from tests.hub.web.conftest import mark_passed
    from tests.support.servers import serve_app

    work = Path(tempfile.mkdtemp(prefix="openenv-play-bench-"))
    try:
        root = work / "envs"
        for name in envs:
            shutil.copytree(
                ROOT / "envs" / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".venv", "*.pyc")
            )
        url = f"sqlite:///{work / 'hub.sqlite3'}"
        migrate(url)
        factory = sessionmaker_for(make_engine(url))
        index_source(factory, LocalSource(root, trusted=True))
        with factory.begin() as db:
            mark_passed(db, root)
        big = 10**6  # one visitor makes thousands of steps: no rate limit or cap is the subject here
        settings = HubSettings(
            data_dir=work / "data",
            database_url=url,
            local_source=str(root),
            builder="process",
            play_instance_linger_s=600.0,
            play_max_instances=len(envs) + 1,
            play_max_sessions=32,
            play_max_sessions_per_visitor=16,
            play_visitor_share=1.0,
            play_idle_timeout_s=3600.0,
            rate_play_burst=big,
            rate_web_burst=big,
            rate_web_per_minute=big,
        )
        with serve_app(create_app(settings, run_migrations=False)) as service:
            yield service
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    from tests.support.browser import CHROMIUM, FLAGS, ISOLATED, LAUNCHER

    if not Path(CHROMIUM).exists():
        raise BenchmarkError(f"no Chromium at {CHROMIUM}: `bash scripts/browser` installs it")
    with sync_playwright() as p:
        if ISOLATED:  # a network namespace of its own, as the web tests run it (tests/support/browser.py)
            env: dict[str, str | float | bool] = {**os.environ, "OPENENV_TEST_CHROMIUM": CHROMIUM}
            browser = p.chromium.launch(executable_path=str(LAUNCHER), args=FLAGS, env=env)
        else:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def _reset(page: Any, url: str, env: str) -> None:
    page.locator("#oe-play-options textarea, #oe-play-options input").first.fill(json.dumps(OPTIONS.get(env, {})))
    seen = int(page.evaluate("() => window.__oeLatency.shown.length"))
    page.click("#oe-play-reset")
    _wait(page, seen, 0, 120_000)  # this reset's answer (an earlier reset's 0 is not it)


def _wait(page: Any, seen: int, steps: int, ms: int = 30_000) -> dict[str, Any]:
    try:
        return dict(page.evaluate(WAIT, [seen, steps, ms]))
    except Exception as exc:  # Playwright's Error: the promise rejected
        raise BenchmarkError(f"{page.url}: step {steps}: {str(exc).splitlines()[0]}") from None


def _open(page: Any, url: str, env: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{url}/?panel=site&env=local/{env}")
    expect(page.locator("#oe-env-title")).to_have_text(f"local/{env}", timeout=60_000)
    page.get_by_role("tab", name="Play").click()
    _reset(page, url, env)


def _input(page: Any, env: str, keys: bool, rng: random.Random, step: int) -> str:
    """Play one step as a visitor would; returns how ("key", "click" or "form")."""
    buttons = page.locator("#oe-play-choices button:enabled")
    count = buttons.count()
    if count:
        button = buttons.nth(rng.randrange(count))
        classes = (button.get_attribute("class") or "").split()
        key = next((c.removeprefix("oe-key-") for c in classes if c.startswith("oe-key-")), None)
        if keys and key:
            page.keyboard.press(" " if key == "Space" else key)
            return "key"
        button.click()
        return "click"
    field = {"wordle_env": "guess", "coding_env": "code", "echo_env": "message"}.get(env)
    if field is None:
        raise BenchmarkError(f"{env} shows neither action buttons nor a form this benchmark knows")
    text = {
        "wordle_env": GUESSES[step % len(GUESSES)],
        "coding_env": f"print({step} * 7)",
        "echo_env": f"message {step}",
    }[env]
    page.locator(f"#oe-field-{field} textarea, #oe-field-{field} input").first.fill(text)
    page.click("#oe-play-step")
    return "form"


def _settle(page: Any, requests: dict[str, Any], ms: int = 10_000) -> None:
    """Wait until none of the page's requests to the Hub is open (at most `ms`)."""
    waited = 0
    while requests["open"] > 0 and waited < ms:
        page.wait_for_timeout(5)
        waited += 5


def _over(page: Any) -> bool:
    return bool(page.locator("#oe-play-over").count())


def play(browser: Any, url: str, env: str, width: int, steps: int, seed: int) -> dict[str, Any]:
    """`steps` timed steps of `env` at `width` px; the summary, how inputs were made, resets."""
    context = browser.new_context(viewport={"width": width, "height": WIDTHS.get(width, 900)})
    context.set_default_timeout(60_000)
    context.add_init_script(INSTRUMENT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # The website's requests made for the timed steps (its heartbeat aside): how many round trips one costs.
    # Requests still open are waited out before a step is timed: a reset's follow-up (the form drawn
    # for the new episode) must not land in the next step's count or time.
    requests = {"counting": False, "n": 0, "open": 0}

    def ours(request: Any) -> bool:
        return "/gradio_api/" in request.url and "/heartbeat/" not in request.url

    def seen_request(request: Any) -> None:
        if ours(request):
            requests["open"] += 1
            if requests["counting"]:
                requests["n"] += 1

    def ended(request: Any) -> None:
        if ours(request):
            requests["open"] -= 1

    page.on("request", seen_request)
    page.on("requestfinished", ended)
    page.on("requestfailed", ended)
    rng = random.Random(seed)
    latencies: list[float] = []
    how: dict[str, int] = {}
    resets = 0
    try:
        _open(page, url, env)
        counter = 0
        while len(latencies) < steps:
            while _over(page):  # (a new hand of blackjack may be over at once)
                _reset(page, url, env)
                resets += 1
                counter = 0
            _settle(page, requests)
            seen = int(page.evaluate("() => window.__oeLatency.shown.length"))
            requests["counting"] = True
            used = _input(page, env, keys=width >= 1000, rng=rng, step=len(latencies))
            how[used] = how.get(used, 0) + 1
            counter += 1
            shown = _wait(page, seen, counter)
            requests["counting"] = False
            if shown["input"] is None:
                raise BenchmarkError(f"{env} at {width} px: the page saw no input event for step {counter}")
            latencies.append(shown["at"] - shown["input"])
    finally:
        context.close()
    if errors:
        raise BenchmarkError(f"{env} at {width} px: the page raised: {errors[:3]}")
    return {
        **summary(latencies),
        "requests_per_step": round(requests["n"] / len(latencies), 2),
        "inputs": how,
        "resets": resets,
        "latencies_ms": [round(v, 1) for v in latencies],
    }


def run(envs: list[str], widths: list[int], steps: int, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"target_p50_ms": TARGET_MS, "steps": steps, "envs": {}}
    with hub(envs) as url, chromium() as browser:
        for env in envs:
            for width in widths:
                result = play(browser, url, env, width, steps, seed)
                out["envs"].setdefault(env, {})[str(width)] = result
                print(
                    f"  {env:15s} {width:5d} px  p50 {result['p50_ms']:7.1f} ms  p90 {result['p90_ms']:7.1f}  "
                    f"p99 {result['p99_ms']:7.1f}  first/last {result['edge_steps']} p50 "
                    f"{result['first_p50_ms']:.1f} / {result['last_p50_ms']:.1f} ms",
                    file=sys.stderr,
                )
    every = [r for by_width in out["envs"].values() for r in by_width.values()]
    out["worst_p50_ms"] = max(r["p50_ms"] for r in every)
    # Met: the p50 within the target everywhere, over the whole run and over its last EDGE steps (flat).
    out["met"] = all(r["p50_ms"] <= TARGET_MS and r["last_p50_ms"] <= TARGET_MS for r in every)
    return out


def _names(text: str, known: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(
            f"play_latency.py: --envs takes bundled envs, comma-separated ({', '.join(known)}), not {text!r}"
        )
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="timed steps per env and width (default 1000)")
    parser.add_argument("--envs", default=",".join(BUNDLED), help="bundled envs, comma-separated (default: all)")
    parser.add_argument("--widths", default="390,1280", help="window widths in px, comma-separated")
    parser.add_argument("--quick", action="store_true", help="20 steps each: to check that it runs")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random choice of actions")
    parser.add_argument(
        "--label", default="", help="what tree was measured, when not this checkout (a note in the results)"
    )
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    if args.quick:
        args.steps = 20
    if args.steps < 1:
        raise SystemExit("play_latency.py: --steps must be at least 1")
    try:
        widths = [int(w) for w in args.widths.split(",") if w.strip()]
    except ValueError:
        raise SystemExit(
            f"play_latency.py: --widths takes whole numbers of px, comma-separated, not {args.widths!r}"
        ) from None
    envs = _names(args.envs, BUNDLED)
    import logging

    from openenv.server.run import uvicorn_options

    logging.disable(logging.INFO)
    result = run(envs, widths, args.steps, args.seed)
    loop = uvicorn_options()["loop"]
    if _results.publish(NAME, args, result, {"hub service": {"client": None, "server": loop}}):
        return
    print(
        f"worst p50 {result['worst_p50_ms']:.1f} ms (target {TARGET_MS:g} ms): {'met' if result['met'] else 'NOT met'}"
    )


if __name__ == "__main__":
    entry(main)
