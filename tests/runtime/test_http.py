"""The HTTP side of an env server: health, metadata, schema, stateless reset/step/state, OpenAPI."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from openenv import ServerSettings, create_app
from tests.runtime.envs import CountAction, CountEnv, CountObservation, CountState, broken_factory
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    app = create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=7)
    with serve_app(app) as url:
        yield url


def test_health_reports_readiness_and_capacity(count_url: str) -> None:
    body = httpx.get(f"{count_url}/health").json()
    assert body == {"status": "healthy", "active_sessions": 0, "max_sessions": 7}


def test_health_is_unhealthy_when_the_factory_fails() -> None:
    with serve_app(create_app(broken_factory, CountAction, CountObservation)) as url:
        reply = httpx.get(f"{url}/health")
    assert reply.status_code == 503
    assert reply.json()["status"] == "unhealthy"
    assert "database of levels is missing" in reply.json()["error"]


def test_metadata_names_the_env_and_the_protocol(count_url: str) -> None:
    body = httpx.get(f"{count_url}/metadata").json()
    assert body["name"] == "CountEnv"
    assert body["description"].startswith("Counts steps")
    assert body["protocol"] == {
        "version": 1,
        "extensions": ["step-timeout", "render"],
        "fork_unsupported": "CountEnv cannot be snapshotted: it does not implement snapshot() and restore()",
    }
    assert {"readme_content", "version", "author", "documentation_url"} <= set(body)


def test_schema_shows_the_real_state_model(count_url: str) -> None:
    body = httpx.get(f"{count_url}/schema").json()
    assert body["action"] == CountAction.model_json_schema()
    assert body["observation"] == CountObservation.model_json_schema()
    assert body["state"] == CountState.model_json_schema()
    assert "last_message" in body["state"]["properties"]


def test_state_model_is_inferred_from_a_factory_function() -> None:
    def make() -> CountEnv:
        return CountEnv()

    with serve_app(create_app(make, CountAction, CountObservation)) as url:
        assert "last_message" in httpx.get(f"{url}/schema").json()["state"]["properties"]


def test_stateless_reset_step_state(count_url: str) -> None:
    reset = httpx.post(f"{count_url}/reset", json={"seed": 3, "level": 2}).json()
    assert reset["observation"]["echoed"] == "ready"
    assert reset["observation"]["metadata"] == {"seed": 3, "options": ["level"]}
    assert reset["reward"] == 0.0 and reset["done"] is False
    assert httpx.post(f"{count_url}/reset").json()["observation"]["echoed"] == "ready"

    step = httpx.post(f"{count_url}/step", json={"action": {"message": "hey"}}).json()
    assert step["observation"]["echoed"] == "hey" and step["observation"]["count"] == 1
    assert step["reward"] == 1.0

    state = httpx.get(f"{count_url}/state").json()
    assert state == {"episode_id": "new", "step_count": 0, "last_message": ""}


def test_bad_action_is_422_with_pydantic_detail(count_url: str) -> None:
    reply = httpx.post(f"{count_url}/step", json={"action": {"mesage": "typo"}})
    assert reply.status_code == 422
    detail = reply.json()["detail"]
    assert any(e["loc"][-1] == "mesage" and e["type"] == "extra_forbidden" for e in detail)
    assert httpx.post(f"{count_url}/step", json={}).status_code == 422
    assert httpx.post(f"{count_url}/reset", json={"seed": -5}).status_code == 422


def test_env_error_over_http_is_500_with_message(count_url: str) -> None:
    reply = httpx.post(f"{count_url}/step", json={"action": {"message": "x", "fail": True}})
    assert reply.status_code == 500
    assert reply.json() == {"detail": "ValueError: asked to fail on 'x'", "code": "EXECUTION_ERROR"}
    assert httpx.get(f"{count_url}/health").json()["status"] == "healthy"


def test_step_timeout_over_http_is_504(count_url: str) -> None:
    start = time.monotonic()
    reply = httpx.post(
        f"{count_url}/step", json={"action": {"message": "slow", "sleep_s": 3}, "timeout_s": 0.2}, timeout=10
    )
    assert reply.status_code == 504
    assert reply.json()["code"] == "TIMEOUT"
    assert time.monotonic() - start < 2.5


def test_http_calls_close_their_fresh_env(count_url: str) -> None:
    before_built, before_closed = CountEnv.instances, CountEnv.closed
    for _ in range(5):
        reply = httpx.post(f"{count_url}/step", json={"action": {"message": "x"}})
        assert reply.status_code == 200, reply.text
    assert CountEnv.instances - before_built == 5
    assert CountEnv.closed - before_closed == 5


def test_openapi_is_served_with_version_1x(count_url: str) -> None:
    spec = httpx.get(f"{count_url}/openapi.json").json()
    assert spec["info"]["version"].startswith("1.")
    assert {"/health", "/metadata", "/schema", "/reset", "/step", "/state", "/mcp"} <= set(spec["paths"])
    step_body = spec["paths"]["/step"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert step_body["$ref"].endswith("StepRequest")


def test_mcp_endpoint_answers_jsonrpc(count_url: str) -> None:
    reply = httpx.post(f"{count_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}  # CountEnv has no tools
    unknown = httpx.post(f"{count_url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}).json()
    assert unknown["id"] == 2 and unknown["error"]["code"] == -32601


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_MAX_SESSIONS", "3")
    monkeypatch.setenv("OPENENV_SESSION_IDLE_TIMEOUT_S", "0")
    settings = ServerSettings.from_env()
    assert settings.capacity == 3 and settings.session_idle_timeout_s == 0
    monkeypatch.setenv("OPENENV_MAX_SESSIONS", "many")
    with pytest.raises(ValueError, match="OPENENV_MAX_SESSIONS='many' is not a valid"):
        ServerSettings.from_env()
