"""The /ws protocol at the frame level, driven by a different WebSocket library than our client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv import ServerSettings, create_app
from tests.runtime.envs import CountAction, CountEnv, CountObservation, broken_factory
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    app = create_app(CountEnv, CountAction, CountObservation, settings=ServerSettings(max_message_bytes=64 * 1024))
    with serve_app(app) as url:
        yield url


def ws(url: str) -> ClientConnection:
    return connect(url.replace("http", "ws") + "/ws", open_timeout=5, close_timeout=2)


def ask(conn: ClientConnection, frame: object) -> dict:
    conn.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
    return json.loads(conn.recv(timeout=5))


def test_transcript_matches_upstream_shapes(count_url: str) -> None:
    with ws(count_url) as conn:
        reply = ask(conn, {"type": "reset", "data": {"seed": 1}})
        assert reply["type"] == "observation"
        # metadata is in the observation (for 0.3.0's clients) and beside it (where 0.10.0's read it)
        assert set(reply["data"]) == {"observation", "reward", "done", "metadata"}
        assert reply["data"]["metadata"] == reply["data"]["observation"]["metadata"] == {"seed": 1, "options": []}
        assert reply["data"]["observation"]["echoed"] == "ready"
        assert reply["data"]["reward"] == 0.0 and reply["data"]["done"] is False
        assert "reward" not in reply["data"]["observation"] and "done" not in reply["data"]["observation"]

        reply = ask(conn, {"type": "step", "data": {"message": "hi"}})
        assert reply == {
            "type": "observation",
            "data": {
                "observation": {"echoed": "hi", "count": 1, "thread": reply["data"]["observation"]["thread"]},
                "reward": 1.0,
                "done": False,
            },
        }
        state = ask(conn, {"type": "state"})
        assert state == {"type": "state", "data": {"episode_id": "ep-1", "step_count": 1, "last_message": "hi"}}


def test_reset_without_data_and_env_specific_options(count_url: str) -> None:
    with ws(count_url) as conn:
        assert ask(conn, {"type": "reset"})["data"]["observation"]["echoed"] == "ready"
        reply = ask(conn, {"type": "reset", "data": {"seed": 7, "level": "hard"}})
        assert reply["data"]["observation"]["metadata"] == {"seed": 7, "options": ["level"]}


def test_observation_metadata_is_delivered(count_url: str) -> None:
    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, {"type": "step", "data": {"message": "m", "meta": {"reward_components": {"format": 1.0}}}})
        assert reply["data"]["observation"]["metadata"] == {"reward_components": {"format": 1.0}}
        assert reply["data"]["metadata"] == {"reward_components": {"format": 1.0}}


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "INVALID_JSON"),
        ('{"type": ', "INVALID_JSON"),
        ({"type": "bogus"}, "UNKNOWN_TYPE"),
        ({"data": {}}, "UNKNOWN_TYPE"),
        ({"type": "step", "data": {"nope": 1}}, "VALIDATION_ERROR"),
        ({"type": "step", "data": {"message": 5}}, "VALIDATION_ERROR"),
        ({"type": "step"}, "VALIDATION_ERROR"),
        ({"type": "step", "data": [1, 2]}, "VALIDATION_ERROR"),
        ({"type": "step", "data": {"message": "x"}, "extra": 1}, "VALIDATION_ERROR"),
        ({"type": "step", "data": {"message": "x"}, "timeout_s": -1}, "VALIDATION_ERROR"),
        ({"type": "reset", "data": {"seed": "abc"}}, "VALIDATION_ERROR"),
        ({"type": "reset", "data": {"seed": -1}}, "VALIDATION_ERROR"),
        ({"type": "reset", "data": [1]}, "VALIDATION_ERROR"),
        ("[1, 2]", "VALIDATION_ERROR"),
        ("42", "VALIDATION_ERROR"),
        ('"step"', "VALIDATION_ERROR"),
        ("null", "VALIDATION_ERROR"),
    ],
)
def test_bad_frames_get_typed_errors_and_the_session_survives(count_url: str, frame: object, code: str) -> None:
    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        ask(conn, {"type": "step", "data": {"message": "before"}})
        reply = ask(conn, frame)
        assert reply["type"] == "error"
        assert reply["data"]["code"] == code
        assert reply["data"]["message"]
        after = ask(conn, {"type": "step", "data": {"message": "after"}})
        assert after["data"]["observation"] == {
            "echoed": "after",
            "count": 2,
            "thread": after["data"]["observation"]["thread"],
        }


def test_validation_error_lists_pydantic_errors(count_url: str) -> None:
    with ws(count_url) as conn:
        reply = ask(conn, {"type": "step", "data": {"message": 5, "bogus": True}})
        errors = reply["data"]["errors"]
        assert {tuple(e["loc"]) for e in errors} == {("message",), ("bogus",)}
        assert all("msg" in e and "type" in e for e in errors)


def test_env_exception_is_execution_error_with_message(count_url: str) -> None:
    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, {"type": "step", "data": {"message": "boom", "fail": True}})
        assert reply["data"]["code"] == "EXECUTION_ERROR"
        assert "asked to fail on 'boom'" in reply["data"]["message"]
        assert ask(conn, {"type": "step", "data": {"message": "ok"}})["data"]["observation"]["count"] == 1


def test_oversize_frame_is_refused_and_session_survives(count_url: str) -> None:
    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        reply = ask(conn, {"type": "step", "data": {"message": "x" * 100_000}})
        assert reply["data"]["code"] == "MESSAGE_TOO_LARGE"
        assert reply["data"]["limit"] == 64 * 1024
        assert ask(conn, {"type": "step", "data": {"message": "small"}})["data"]["observation"]["echoed"] == "small"


def test_binary_frames_are_read_as_json(count_url: str) -> None:
    with ws(count_url) as conn:
        reply = ask(conn, json.dumps({"type": "reset"}).encode())
        assert reply["type"] == "observation"
        assert ask(conn, b"\xff\xfe")["data"]["code"] == "INVALID_JSON"


def test_close_frame_ends_the_session_cleanly(count_url: str) -> None:
    from websockets.exceptions import ConnectionClosedOK

    with ws(count_url) as conn:
        ask(conn, {"type": "reset"})
        conn.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosedOK) as info:
            conn.recv(timeout=5)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1000


def test_handshake_announces_protocol_and_extensions(count_url: str) -> None:
    with ws(count_url) as conn:
        header = conn.response.headers["x-openenv-protocol"]
    assert header.startswith("1;") and "step-timeout" in header


def test_mcp_frame_without_tools_lists_none(count_url: str) -> None:
    with ws(count_url) as conn:
        reply = ask(conn, {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}})
        call = ask(
            conn, {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "x"}}}
        )
    assert reply["type"] == "mcp"
    assert reply["data"] == {"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}
    assert call["data"]["id"] == 4 and call["data"]["error"]["data"]["error_type"] == "tool_not_found"


def test_capacity_reached_then_closed() -> None:
    app = create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=2)
    with serve_app(app) as url, ws(url) as a, ws(url) as b:
        ask(a, {"type": "reset"})
        ask(b, {"type": "reset"})
        with ws(url) as c:
            reply = json.loads(c.recv(timeout=5))
            assert reply["data"]["code"] == "CAPACITY_REACHED"
            assert reply["data"]["active_sessions"] == 2 and reply["data"]["max_sessions"] == 2
            with pytest.raises(ConnectionClosed) as info:
                c.recv(timeout=5)
            assert info.value.rcvd is not None and info.value.rcvd.code == 1013
        a.close()
        # The freed slot is usable again.
        with ws(url) as d:
            assert ask(d, {"type": "reset"})["type"] == "observation"


def test_factory_error_then_closed() -> None:
    app = create_app(broken_factory, CountAction, CountObservation)
    with serve_app(app) as url, ws(url) as conn:
        reply = json.loads(conn.recv(timeout=5))
        assert reply["data"]["code"] == "FACTORY_ERROR"
        assert "database of levels is missing" in reply["data"]["message"]
        with pytest.raises(ConnectionClosed):
            conn.recv(timeout=5)
