"""Rendering: `openenv.render` (frames, sanitizing, HTML, action choices) and the "render" protocol
extension over /ws, POST /render and the client, invisible to anyone who does not ask."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import numpy as np
import pytest
from pydantic import Field
from websockets.sync.client import connect

from openenv import Action, EnvClient, EnvExecutionError, Environment, State, create_app
from openenv.render import MAX_FRAME_BYTES, Choice, Frame, action_choices, as_frame, frame_html, sanitize_frame
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import serve_app

HOSTILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" viewBox="0 0 10 10">'
    '<script>alert(2)</script><foreignObject><iframe src="https://evil.example"></iframe></foreignObject>'
    '<image href="https://evil.example/x.png"/><use href="https://evil.example/s.svg#a"/><use href="#piece"/>'
    "<style>rect{fill:url(https://evil.example/f)}</style>"
    '<rect id="piece" width="5" height="5" fill="red" style="fill:blue;background:url(https://evil.example/b)" onclick="x()"/>'
    '<a href="javascript:alert(3)"><text x="1" y="9">a &amp; b</text></a></svg>'
)


# -- frames --------------------------------------------------------------------------------------------


def test_frames_travel_as_json_and_come_back_equal() -> None:
    for frame in (Frame("image/png", b"\x89PNG\r\n\x1a\nxyz"), Frame("text/x-ansi", "\x1b[31mred ♥\x1b[0m".encode())):
        wire = json.loads(json.dumps(frame.to_wire()))
        assert Frame.from_wire(wire) == frame
    assert Frame("image/png", b"abc").to_wire()["encoding"] == "base64"
    assert Frame("image/svg+xml", b"<svg/>").to_wire() == {
        "media_type": "image/svg+xml",
        "encoding": "utf-8",
        "data": "<svg/>",
    }


@pytest.mark.parametrize(
    ("junk", "says"),
    [
        ("a string", "must be an object"),
        ({"media_type": "video/mp4", "encoding": "base64", "data": ""}, "unknown frame media_type"),
        ({"media_type": "image/png", "encoding": "base64", "data": "!!not base64!!"}, "does not decode"),
        ({"media_type": "image/png", "encoding": "rot13", "data": ""}, "unknown frame encoding"),
        ({"media_type": "text/plain", "encoding": "utf-8", "data": 5}, "must be a string"),
    ],
)
def test_junk_on_the_wire_is_refused_clearly(junk: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Frame.from_wire(junk)


def test_what_render_may_return() -> None:
    assert as_frame(None) is None
    assert as_frame("plain").media_type == "text/plain"  # type: ignore[union-attr]
    assert as_frame("\x1b[1mbold\x1b[0m").media_type == "text/x-ansi"  # type: ignore[union-attr]
    assert as_frame(("image/svg+xml", "<svg/>")) == Frame("image/svg+xml", b"<svg/>")
    assert as_frame(b"\xff\xd8\xff\xe0jpeg").media_type == "image/jpeg"  # type: ignore[union-attr]
    screen = np.zeros((3, 5, 3), dtype=np.uint8)
    screen[1, 2] = (255, 0, 0)
    png = as_frame(screen)
    assert png is not None and png.media_type == "image/png"
    from atari_env.models import decode_png  # an independent PNG reader

    pixels, shape = decode_png(png.data)
    assert shape == (3, 5, 3) and pixels[(1 * 5 + 2) * 3 : (1 * 5 + 2) * 3 + 3] == b"\xff\x00\x00"
    for bad, says in (
        (42, "returned a int"),
        (("video/mp4", b""), "unknown frame media_type"),
        (b"GIF89a", "neither PNG nor JPEG"),
        (np.zeros((2, 2), dtype=np.float32), "must be uint8"),
    ):
        with pytest.raises(ValueError, match=says):
            as_frame(bad)


def test_svg_keeps_its_drawing_and_loses_everything_that_could_run_or_fetch() -> None:
    clean = sanitize_frame(Frame("image/svg+xml", HOSTILE_SVG.encode())).text()
    for gone in (
        "script",
        "onload",
        "onclick",
        "foreignObject",
        "iframe",
        "<image",
        "evil.example",
        "javascript:",
        "<style",
        "url(",
    ):
        assert gone not in clean, gone
    assert clean.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert '<use href="#piece"' in clean and 'fill="red"' in clean and "fill:blue" in clean and "a &amp; b" in clean
    import xml.dom.minidom

    xml.dom.minidom.parseString(clean)  # still an image a browser can load


def test_html_fragments_and_size_and_type_limits() -> None:
    html = '<div class="board" onclick="x()"><b>hi</b><img src="https://evil.example/p.png"><script>x()</script></div>'
    clean = sanitize_frame(Frame("text/html", html.encode())).text()
    assert clean == '<div class="board"><b>hi</b></div>'
    with pytest.raises(ValueError, match=r"over the .* limit; render a smaller picture"):
        sanitize_frame(Frame("image/png", b"\0" * (MAX_FRAME_BYTES + 1)))
    with pytest.raises(ValueError, match="unknown frame media_type"):
        sanitize_frame(Frame("application/javascript", b"alert(1)"))
    with pytest.raises(ValueError, match="no <svg> element"):
        sanitize_frame(Frame("image/svg+xml", b"<p>not an svg</p>"))


def test_frame_html_shows_images_as_data_urls_and_text_escaped_with_colours() -> None:
    snippet = frame_html(Frame("image/svg+xml", HOSTILE_SVG.encode()))
    assert snippet.startswith('<img class="oe-frame"') and 'src="data:image/svg+xml;base64,' in snippet
    inner = base64.b64decode(snippet.split("base64,")[1].split('"')[0]).decode()
    assert "script" not in inner and "evil.example" not in inner
    assert frame_html(Frame("image/png", b"\x89PNG")).count("data:image/png;base64,") == 1
    ansi = frame_html(Frame("text/x-ansi", b"\x1b[1;31mError\x1b[0m: <b>&\x1b[38;5;46mok\x1b[2J"))
    assert ansi == (
        '<pre class="oe-frame oe-ansi" aria-label="the environment"><span class="oe-b oe-fg1">Error</span>: '
        '&lt;b&gt;&amp;<span class="oe-fg2">ok</span></pre>'
    )
    assert "&lt;script&gt;" in frame_html(Frame("text/plain", b"<script>"))


# -- action choices ------------------------------------------------------------------------------------


class Move(Action):
    move: Literal["up", "down", "left", "right"]


class Named(Action):
    action: int = Field(ge=0, le=17)


class Free(Action):
    text: str
    count: int


def test_finite_action_spaces_become_buttons() -> None:
    grid = action_choices(Move.model_json_schema(), {"observation": {"legal_moves": ["up", "left"]}})
    assert grid == [Choice("up", {"move": "up"}, "ArrowUp"), Choice("left", {"move": "left"}, "ArrowLeft")]
    assert [c.label for c in action_choices(Move.model_json_schema(), None) or []] == ["up", "down", "left", "right"]
    atari = action_choices(Named.model_json_schema(), {"legal_actions": ["NOOP", "FIRE", "LEFT"]})
    assert atari == [
        Choice("NOOP", {"action": 0}, "n"),
        Choice("FIRE", {"action": 1}, " "),
        Choice("LEFT", {"action": 2}, "ArrowLeft"),
    ]
    from chess_env.models import ChessAction

    chess = action_choices(ChessAction.model_json_schema(), {"legal_moves": ["e2e4", "g1f3"]})
    assert [c.action for c in chess or []] == [{"move": "e2e4"}, {"move": "g1f3"}]
    assert (
        action_choices(ChessAction.model_json_schema(), {"legal_moves": []}) == []
    )  # finite, nothing legal: game over


def test_free_form_actions_get_the_form() -> None:
    assert action_choices(Free.model_json_schema(), {"legal_actions": ["a"]}) is None
    from chess_env.models import ChessAction
    from wordle_env.models import WordleAction

    assert action_choices(WordleAction.model_json_schema(), {"board": []}) is None
    assert action_choices(ChessAction.model_json_schema(), {}) is None  # a free string without a legal list
    assert action_choices(None, None) is None


# -- the protocol extension ----------------------------------------------------------------------------


class Drawn(CountEnv):
    def render(self) -> Any:
        if self.state.last_message == "boom":
            raise RuntimeError("the pen broke")
        return f"\x1b[32mcount {self.state.step_count}\x1b[0m"


class NoPicture(Environment[CountAction, CountObservation, State]):
    def reset(self, seed: int | None = None, **kwargs: Any) -> CountObservation:
        return CountObservation(echoed="ready", count=0)

    def step(self, action: CountAction, **kwargs: Any) -> CountObservation:
        return CountObservation(echoed=action.message, count=1)

    @property
    def state(self) -> State:
        return State()


@pytest.fixture(scope="module")
def drawn_url() -> Iterator[str]:
    with serve_app(create_app(Drawn, CountAction, CountObservation)) as url:
        yield url


def _ask(conn: Any, frame: dict) -> dict:
    conn.send(json.dumps(frame))
    return json.loads(conn.recv(timeout=5))


def test_render_over_the_websocket_and_errors_keep_the_session(drawn_url: str) -> None:
    assert "render" in httpx.get(f"{drawn_url}/metadata").json()["protocol"]["extensions"]
    with connect(drawn_url.replace("http", "ws") + "/ws", open_timeout=5) as conn:
        reset = _ask(conn, {"type": "reset"})
        assert "render" not in json.dumps(reset)  # no other reply changes
        _ask(conn, {"type": "step", "data": {"message": "hi"}})
        assert _ask(conn, {"type": "render"}) == {
            "type": "render",
            "data": {"media_type": "text/x-ansi", "encoding": "utf-8", "data": "\x1b[32mcount 1\x1b[0m"},
        }
        _ask(conn, {"type": "step", "data": {"message": "boom"}})
        error = _ask(conn, {"type": "render"})
        assert error["type"] == "error" and error["data"]["code"] == "EXECUTION_ERROR"
        assert error["data"]["message"] == "RuntimeError: the pen broke"
        assert _ask(conn, {"type": "step", "data": {"message": "on"}})["type"] == "observation"
        assert _ask(conn, {"type": "render"})["data"]["data"].endswith("count 3\x1b[0m")


def test_render_over_http_draws_a_fresh_reset_env(drawn_url: str) -> None:
    reply = httpx.post(f"{drawn_url}/render", json={"seed": 1})
    assert reply.status_code == 200
    assert Frame.from_wire(reply.json()).text() == "\x1b[32mcount 0\x1b[0m"
    with serve_app(create_app(NoPicture, CountAction, CountObservation)) as url:
        assert httpx.post(f"{url}/render").json() is None
        with connect(url.replace("http", "ws") + "/ws", open_timeout=5) as conn:
            assert _ask(conn, {"type": "render"}) == {"type": "render", "data": None}


async def test_the_client_renders_and_says_none_when_it_cannot(drawn_url: str) -> None:
    async with EnvClient(drawn_url) as env:
        await env.reset()
        await env.step(CountAction(message="x"))
        frame = await env.render()
        assert frame == Frame("text/x-ansi", b"\x1b[32mcount 1\x1b[0m")
        await env.step(CountAction(message="boom"))
        with pytest.raises(EnvExecutionError, match="the pen broke"):
            await env.render()
        env._conn.extensions = frozenset()  # type: ignore[union-attr]  # as with a server of upstream's
        assert await env.render() is None
    with EnvClient(drawn_url).sync() as env:
        env.reset()
        assert env.render() == Frame("text/x-ansi", b"\x1b[32mcount 0\x1b[0m")
