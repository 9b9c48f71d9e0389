"""Headless Chromium for browser tests (Playwright, Debian's /usr/bin/chromium; no browser download).

Fixtures: `browser` (one Chromium per test module) and `new_page()` (a fresh context per call, so
each page is a visitor of its own). When a test fails, a screenshot of every page it opened is
saved under test-artifacts/ (gitignored; CI keeps it), beside the page's network log: each
request's start, duration and status, the ones still unanswered marked PENDING, and the console.

Chromium runs in a network namespace of its own (tests/support/chromium_netns.py) when the tests
run as root. Chromium cancels every request it has in flight with ERR_NETWORK_CHANGED when the
addresses of its namespace change, loopback requests included, and each Docker network created or
removed adds or removes a bridge with an address. Sharing the machine's namespace, beside the
parallel workers (whose Hubs make and remove networks), a Gradio page lost script chunks and stayed
at "Loading..." in four of six fresh-clone runs; the failing pages' network logs named the error.
Checked apart: a page of 300 slow requests lost 268-292 of them on every load (75 of 75) while a
loop created and removed a network, none in 12 loads with its own namespace under the same loop.
Without root there is no namespace, and every browser test is marked `serial` (run alone). The
website's Gradio page tests (marked `pages`) do not run beside the parallel workers either way, for
CPU: there they made the whole fresh-clone run slower (26 min 47 s against 24 min 52 s, one run
each). scripts/test runs them after the parallel run, two at a time and nothing else beside.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import ROOT
from tests.support.systems import require_system

CHROMIUM = os.environ.get("OPENENV_TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = ROOT / "test-artifacts"
ISOLATED = os.geteuid() == 0 and shutil.which("ip") is not None
LAUNCHER = Path(__file__).with_name("chromium_netns.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without a namespace of its own Chromium cannot share the machine with the parallel workers."""
    if not ISOLATED:
        for item in items:
            if "browser" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.serial)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        require_system("Chromium", f"nothing at {CHROMIUM}: `bash scripts/browser` installs it (scripts/test does)")
    from playwright.sync_api import expect, sync_playwright

    # What a page shows is waited for as long as a click is (Playwright's own default is 5 s): the
    # Gradio pages build themselves after load, slower while parallel test workers share the CPU.
    expect.set_options(timeout=20_000)
    with sync_playwright() as p:
        if ISOLATED:
            env = {**os.environ, "OPENENV_TEST_CHROMIUM": CHROMIUM}
            chromium = p.chromium.launch(executable_path=str(LAUNCHER), args=FLAGS, env=env)
        else:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """`new_page()` → a page in a context of its own (a new visitor); screenshots on failure."""
    contexts: list[Any] = []
    pages: list[Any] = []
    logs: list[Callable[[], str]] = []
    errors: list[str] = []

    def make(**options: Any) -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        logs.append(_watch_network(page))
        pages.append(page)
        return page

    make.errors = errors  # type: ignore[attr-defined]
    yield make
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-150:]
        for i, page in enumerate(pages):
            if not page.is_closed():
                try:
                    page.screenshot(path=str(ARTIFACTS / f"{slug}-{i}.png"), full_page=True)
                except Exception as exc:  # a crashed page: say so next to the other artifacts
                    (ARTIFACTS / f"{slug}-{i}.txt").write_text(f"no screenshot: {exc}\n")
            (ARTIFACTS / f"{slug}-{i}-network.txt").write_text(logs[i]())
    for context in contexts:
        context.close()


def _watch_network(page: Any) -> Callable[[], str]:
    """Record the page's requests and console; returns what renders the record as text."""
    t0 = time.monotonic()
    started: dict[Any, tuple[float, str]] = {}
    done: list[tuple[float, float, str, str]] = []
    console: list[str] = []
    statuses: dict[Any, int] = {}

    def finished(request: Any, outcome: str) -> None:
        start, line = started.pop(request, (time.monotonic() - t0, f"{request.method} {request.url}"))
        done.append((start, time.monotonic() - t0 - start, outcome, line))

    page.on("request", lambda r: started.__setitem__(r, (time.monotonic() - t0, f"{r.method} {r.url}")))
    page.on("response", lambda r: statuses.__setitem__(r.request, r.status))
    page.on("requestfinished", lambda r: finished(r, str(statuses.pop(r, "done"))))
    page.on("requestfailed", lambda r: finished(r, f"FAILED {r.failure}"))
    page.on("console", lambda m: console.append(f"{time.monotonic() - t0:7.2f}s {m.type}: {m.text}"))

    def render() -> str:
        now = time.monotonic() - t0
        rows = [f"{s:7.2f}s {d:6.2f}s {o:<8} {line[:200]}" for s, d, o, line in done]
        rows += [f"{s:7.2f}s {now - s:6.2f}s PENDING  {line[:200]}" for s, line in started.values()]
        return "\n".join([*sorted(rows), "", "console:", *console]) + "\n"

    return render
