"""The env server's own play page at /web: off unless asked for, one session per browser tab,
observations shown readably (images as images) and never as HTML, and nothing heavy imported."""

from __future__ import annotations

import base64
import struct
import subprocess
import sys
import zlib
from typing import Any, Literal

import httpx
import pytest
from pydantic import Field

from openenv import Action, Environment, Observation, State, create_app
from openenv.server.settings import ServerSettings
from tests.support.servers import ROOT, serve_app

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _png(width: int = 4, height: int = 3) -> str:
    rows = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode()


class MoveAction(Action):
    direction: Literal["up", "down"] = Field(description="Where to go.")
    steps: int = Field(default=1, ge=1, le=3)
    note: str = ""


class ScreenObservation(Observation):
    screen: str = ""
    board: list[list[int]] = Field(default_factory=list)
    note: str = ""
    position: int = 0


class ScreenEnv(Environment[MoveAction, ScreenObservation, State]):
    def __init__(self) -> None:
        self._state = State(episode_id="e", step_count=0)
        self.position = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> ScreenObservation:
        self._state = State(episode_id="e", step_count=0)
        self.position = 0
        return ScreenObservation(screen=_png(), board=[[0, 1], [1, 0]], note=HOSTILE)

    def step(self, action: MoveAction, **kwargs: Any) -> ScreenObservation:
        self._state.step_count += 1
        self.position += action.steps if action.direction == "up" else -action.steps
        return ScreenObservation(
            screen=_png(),
            board=[[self.position, 0]],
            note=action.note,
            position=self.position,
            reward=1.0,
            done=self.position >= 6,
        )

    @property
    def state(self) -> State:
        return self._state


def _app(**kwargs: Any) -> Any:
    return create_app(ScreenEnv, MoveAction, ScreenObservation, env_name="screen_env", **kwargs)


def test_web_is_off_by_default_and_on_by_setting_or_argument() -> None:
    off = _app(settings=ServerSettings(enable_web_interface=False))
    by_setting = _app(settings=ServerSettings.from_env({"OPENENV_ENABLE_WEB_INTERFACE": "true"}))
    by_argument = _app(settings=ServerSettings(), enable_web_interface=True)
    with serve_app(off) as a, serve_app(by_setting) as b, serve_app(by_argument) as c:
        assert httpx.get(f"{a}/web").status_code == 404
        for url in (b, c):
            page = httpx.get(f"{url}/web")
            assert page.status_code == 200 and "screen_env" in page.text
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert httpx.get(f"{url}/web/app.js").headers["content-type"].startswith("text/javascript")
            assert httpx.get(f"{url}/web/nope.js").status_code == 404
            assert httpx.get(f"{url}/", follow_redirects=False).headers["location"] == "/web"
            assert "/web" not in httpx.get(f"{url}/openapi.json").json()["paths"]


def test_each_tab_plays_its_own_session(new_page) -> None:
    with serve_app(_app(enable_web_interface=True)) as url:
        first, second = new_page(), new_page()
        for page in (first, second):
            page.goto(f"{url}/web")
            page.click("#reset")
            page.wait_for_selector("#observation table")
        # a Literal field: one button per value; the form folds away, one click opens it
        first.wait_for_selector("#choices button.choice")
        first.click("#custom summary")
        first.select_option("#field-direction", label='"up"')
        first.fill("#field-steps", "2")
        first.fill("#field-note", HOSTILE)
        for _ in range(2):
            first.click("#step")
        from playwright.sync_api import expect

        expect(first.locator("#history li")).to_have_count(2)
        expect(first.locator("#steps")).to_have_text("2")
        second.click("#state")
        expect(second.locator("#state-view")).to_contain_text('"step_count": 0')
        first.click("#state")
        expect(first.locator("#state-view")).to_contain_text('"step_count": 2')
        # the position is this tab's alone: 2 steps of 2 up
        expect(first.locator("#observation")).to_contain_text("position")
        assert first.locator("#observation tr", has_text="position").inner_text().split()[-1] == "4"
        # the PNG is an image, the grid a table, and the hostile note plain text that ran nothing
        img = first.locator("#observation img.frame")
        expect(img).to_have_count(1)
        assert img.evaluate("i => i.naturalWidth") == 4
        assert first.locator("#observation table.grid td").count() == 2
        expect(first.locator("#observation")).to_contain_text("onerror")
        assert first.evaluate("() => window.__pwned === undefined")
        # a bad action is refused with the env's own message, and the session goes on
        first.check("#json-mode")
        first.fill("#action-json", '{"direction": "sideways"}')
        first.click("#step")
        expect(first.locator("#error")).to_contain_text("Not a valid action")
        first.fill("#action-json", '{"direction": "up", "steps": 3}')
        first.click("#step")
        expect(first.locator("#history li")).to_have_count(3)
        expect(first.locator("#done")).to_have_text("true")
        assert not new_page.errors


def test_the_env_server_import_path_does_not_grow() -> None:
    """Importing an env app (web interface on, as in every image) loads no UI library."""
    code = (
        "import os, sys; os.environ['OPENENV_ENABLE_WEB_INTERFACE'] = 'true'; sys.path.insert(0, 'envs/echo_env');"
        "import server.app as a; assert any(r.path == '/web' for r in a.app.routes);"
        "heavy = [m for m in ('gradio', 'jinja2', 'markdown_it', 'nh3', 'hub_service', 'openai') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("path", ["/web", "/web/"])
def test_the_page_finds_its_assets_under_a_root_path(path: str) -> None:
    app = _app(enable_web_interface=True)
    app.root_path = "/proxy"
    with serve_app(app) as url:
        page = httpx.get(f"{url}{path}").text
        assert 'src="/proxy/web/app.js"' in page and 'data-root="/proxy"' in page
