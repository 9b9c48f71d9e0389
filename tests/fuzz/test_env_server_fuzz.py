"""Fuzzing an env server: its HTTP API from its own OpenAPI spec, and its WebSocket with random frames.

Properties: no 5xx, no crash, every frame gets exactly one well-formed reply, and no session leaks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import schemathesis.specs.openapi.schemas  # imported at collection: see below
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from openenv import ServerSettings, create_app
from tests.support.servers import serve_app

pytestmark = pytest.mark.slow

# schemathesis.openapi.from_url imports its OpenAPI modules on first use, and as a pytest plugin
# they go through pytest's assertion rewriting, which parses them with `ast.parse`. CPython 3.11's
# AST builder keeps its recursion depth in per-interpreter state, which a parse in another thread
# at the same moment can throw off (CPython gh-106905): in the middle of a test, beside the server
# threads of earlier ones, a CI run failed with "SystemError: AST constructor recursion depth
# mismatch". They are imported here, at collection, instead.


@pytest.fixture(scope="module")
def fuzz_url() -> Iterator[str]:
    from echo_env.models import EchoAction, EchoObservation
    from echo_env.server.echo_environment import EchoEnvironment

    app = create_app(EchoEnvironment, EchoAction, EchoObservation, settings=ServerSettings(max_message_bytes=16 * 1024))
    with serve_app(app) as url:
        yield url


def fuzz_openapi(base_url: str, max_examples: int) -> tuple[int, list[str]]:
    """Call every operation of the API at `base_url` with cases generated from its OpenAPI spec;
    returns how many calls were made and the failures (5xx answers)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    failures: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def call(case) -> None:
            nonlocal calls
            calls += 1
            response = case.call(base_url=base_url, timeout=10)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.path} {case.body!r} -> {response.status_code} {response.text[:200]}"
                )

        call()
    return calls, failures


def test_http_api_never_answers_5xx(fuzz_url: str) -> None:
    calls, failures = fuzz_openapi(fuzz_url, 40)
    assert calls >= 100  # bodies of reset, step and mcp were generated (GETs without parameters need one call)
    assert not failures, failures[:5]
    assert httpx.get(f"{fuzz_url}/health").json()["status"] == "healthy"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# The "fork" extension's frames (docs/protocol.md) and the reply types any frame may get.
FORK_TYPES = ["snapshot", "restore", "release", "fork", "get_state", "set_state"]
REPLY_TYPES = {"observation", "state", "error", "mcp", "snapshot", "release", "fork"}
frames = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["reset", "step", "state", "mcp", "bogus", "", "STEP", *FORK_TYPES])},
        optional={
            "data": json_values,
            "timeout_s": st.one_of(st.floats(-1, 0.5), st.text(max_size=3)),
            "x": json_values,
        },
    ).map(json.dumps),
    st.fixed_dictionaries(
        {
            "type": st.just("step"),
            "data": st.fixed_dictionaries({"message": st.text(max_size=30)}, optional={"meta": json_values}),
        }
    ).map(json.dumps),
    st.binary(max_size=40),
    st.just("x" * 20_000),
).filter(lambda frame: not _is_close(frame))


def _is_close(frame: str | bytes) -> bool:
    # A close frame ends the session by design (hypothesis does find b'{"type":"close"}'); every
    # other frame must get a reply on the same session.
    try:
        value = json.loads(frame)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("type") == "close"


def test_websocket_frame_fuzzer(fuzz_url: str) -> None:
    ws_url = fuzz_url.replace("http", "ws") + "/ws"
    with connect(ws_url, open_timeout=5) as conn:

        @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
        @given(frame=frames)
        def one_frame(frame: str | bytes) -> None:
            conn.send(frame)
            reply = json.loads(conn.recv(timeout=5))
            assert isinstance(reply, dict) and reply.get("type") in REPLY_TYPES, reply
            if reply["type"] == "error":
                assert isinstance(reply["data"]["code"], str) and reply["data"]["message"]

        one_frame()
        conn.send(json.dumps({"type": "reset"}))
        assert json.loads(conn.recv(timeout=5))["type"] == "observation"  # still a working session
    deadline = time.monotonic() + 5
    while httpx.get(f"{fuzz_url}/health").json()["active_sessions"] and time.monotonic() < deadline:
        time.sleep(0.05)
    health = httpx.get(f"{fuzz_url}/health").json()
    assert health["status"] == "healthy" and health["active_sessions"] == 0
