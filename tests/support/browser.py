"""Headless Chromium for browser tests (Playwright, Debian's /usr/bin/chromium; no browser download).

Fixtures: `browser` (one Chromium per test module) and `new_page()` (a fresh context per call, so
each page is a visitor of its own). When a test fails, a screenshot of every page it opened is
saved under test-artifacts/ (gitignored; CI keeps it).
"""

from __future__ import annotations

import os
import re
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
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """`new_page()` → a page in a context of its own (a new visitor); screenshots on failure."""
    contexts: list[Any] = []
    pages: list[Any] = []
    errors: list[str] = []

    def make(**options: Any) -> Any:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
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
    for context in contexts:
        context.close()
