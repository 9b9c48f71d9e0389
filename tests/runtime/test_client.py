"""EnvClient, SyncEnvClient and GenericEnvClient as a user sees them."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from openenv import (
    CapacityReachedError,
    ConfigurationError,
    EnvClient,
    EnvConnectionError,
    EnvDisconnectedError,
    EnvExecutionError,
    EnvServerError,
    EnvTimeoutError,
    GenericEnvClient,
    InvalidActionError,
    StepResult,
    create_app,
)
from openenv.client import SchemaMismatchError
from openenv.client._transport import ws_url_for
from tests.runtime.envs import CountAction, CountClient, CountEnv, CountObservation, CountState
from tests.support.servers import ROOT, ProcessServer, serve_app


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    with serve_app(create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=64)) as url:
        yield url


async def test_typed_subclass_parses_into_the_models(count_url: str) -> None:
    async with CountClient(count_url) as env:
        result = await env.reset(seed=5)
        assert isinstance(result, StepResult)
        assert isinstance(result.observation, CountObservation)
        assert result.observation.metadata == {"seed": 5, "options": []}
        step = await env.step(CountAction(message="hi", meta={"k": 1}))
        assert step.observation.echoed == "hi" and step.observation.count == 1
        assert step.reward == 1.0 and step.observation.reward == 1.0
        assert step.observation.metadata == {"k": 1}
        state = await env.state()
        assert isinstance(state, CountState) and state.last_message == "hi" and state.episode_id == "ep-5"


async def test_parametrized_alias_works_without_a_subclass(count_url: str) -> None:
    env = EnvClient[CountAction, CountObservation, CountState](count_url)
    async with env:
        await env.reset()
        result = await env.step(CountAction(message="alias"))
        assert isinstance(result.observation, CountObservation)
        assert isinstance(await env.state(), CountState)


async def test_done_flag_and_dict_actions(count_url: str) -> None:
    async with CountClient(count_url) as env:
        await env.reset()
        result = await env.step({"message": "end", "done": True})
        assert result.done is True and result.observation.done is True


async def test_generic_client_speaks_dicts(count_url: str) -> None:
    async with GenericEnvClient(count_url) as env:
        reset = await env.reset(seed=1)
        assert reset.observation["echoed"] == "ready"
        result = await env.step({"message": "plain"})
        assert result.observation["echoed"] == "plain" and result.reward == 1.0
        assert (await env.step(CountAction(message="model"))).observation["count"] == 2
        assert (await env.state())["last_message"] == "model"


async def test_typed_errors_carry_the_server_code(count_url: str) -> None:
    async with CountClient(count_url) as env:
        await env.reset()
        with pytest.raises(InvalidActionError) as bad:
            await env.step({"mesage": "typo"})
        assert bad.value.code == "VALIDATION_ERROR"
        assert any(e["loc"] == ["mesage"] for e in bad.value.errors)
        assert count_url in str(bad.value)
        with pytest.raises(EnvExecutionError, match="asked to fail") as failed:
            await env.step(CountAction(message="x", fail=True))
        assert isinstance(failed.value, RuntimeError)  # code written for upstream catches RuntimeError
        assert (await env.step(CountAction(message="ok"))).observation.count == 1


async def test_capacity_error_is_typed() -> None:
    with serve_app(create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=1)) as url:
        async with CountClient(url) as first:
            await first.reset()
            second = CountClient(url)
            with pytest.raises(CapacityReachedError) as info:
                await second.reset()
            assert (info.value.active_sessions, info.value.max_sessions) == (1, 1)
            with pytest.raises(EnvDisconnectedError):
                await second.step(CountAction(message="x"))
            await second.close()


async def test_schema_mismatch_is_reported(count_url: str) -> None:
    from pydantic import BaseModel

    class Wrong(CountObservation):
        required_but_missing: int

    class WrongState(BaseModel):
        model_config = {"extra": "forbid"}
        episode_id: str

    async with EnvClient[CountAction, Wrong, WrongState](count_url) as env:
        with pytest.raises(SchemaMismatchError, match="required_but_missing"):
            await env.reset()
        with pytest.raises(SchemaMismatchError, match="WrongState"):
            await env.state()


async def test_refused_connection_names_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = CountClient(f"http://127.0.0.1:{port}", connect_timeout_s=2)
    with pytest.raises(EnvConnectionError, match=f"127.0.0.1:{port}") as info:
        await env.reset()
    assert isinstance(info.value, ConnectionError)


async def test_connect_timeout_when_the_server_never_answers() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts TCP but never speaks HTTP
    port = listener.getsockname()[1]
    try:
        env = CountClient(f"http://127.0.0.1:{port}", connect_timeout_s=0.5)
        start = time.monotonic()
        with pytest.raises(EnvTimeoutError, match="no WebSocket handshake"):
            await env.connect()
        assert time.monotonic() - start < 3
    finally:
        listener.close()


async def test_handshake_rejected_by_a_non_env_server() -> None:
    from fastapi import FastAPI

    with serve_app(FastAPI()) as url, pytest.raises(EnvConnectionError, match="is this an OpenEnv server"):
        await CountClient(url).connect()


async def test_message_timeout_keeps_the_session_usable(count_url: str) -> None:
    async with CountClient(count_url, message_timeout_s=0.3) as env:
        await env.reset()
        with pytest.raises(EnvTimeoutError, match=r"0\.3s"):
            await env.step(CountAction(message="slow", sleep_s=1.0))
        await asyncio.sleep(1.0)  # the late reply arrives meanwhile and must be dropped
        result = await env.step(CountAction(message="next"))  # ...so this gets its own reply
        assert result.observation.echoed == "next" and result.observation.count == 2


async def test_server_killed_mid_episode_gives_a_clear_error_not_a_hang() -> None:
    server = ProcessServer([sys.executable, "-m", "openenv.server", "server.app:app"], cwd=ROOT / "envs" / "echo_env")
    from echo_env import EchoAction, EchoEnv

    try:
        url = server.wait()
        env = EchoEnv(url, message_timeout_s=30)
        await env.reset()
        await env.step(EchoAction(message="alive"))
        server.proc.kill()
        start = time.monotonic()
        with pytest.raises(EnvDisconnectedError, match=r"connection to the server was lost|closed"):
            await env.step(EchoAction(message="dead"))
        assert time.monotonic() - start < 5
        with pytest.raises(EnvDisconnectedError):
            await env.state()
        with pytest.raises(EnvConnectionError):
            await env.reset()  # reset tries a new session, and says the server is unreachable
        await env.close()
    finally:
        server.stop()


async def test_pipelined_calls_on_one_client_keep_their_order(count_url: str) -> None:
    async with CountClient(count_url) as env:
        await env.reset()
        results = await asyncio.gather(*(env.step(CountAction(message=str(i))) for i in range(50)))
        assert [r.observation.echoed for r in results] == [str(i) for i in range(50)]
        assert [r.observation.count for r in results] == list(range(1, 51))


def test_sync_client_in_a_script(count_url: str) -> None:
    with CountClient(count_url).sync() as env:
        assert env.reset().observation.echoed == "ready"
        assert env.step(CountAction(message="s")).observation.count == 1
        assert env.state().last_message == "s"


def test_sync_client_inside_a_running_event_loop(count_url: str) -> None:
    """Jupyter runs cells inside a live event loop; blocking calls must still work there."""

    async def notebook_cell() -> tuple[str, int]:
        with CountClient(count_url).sync() as env:
            env.reset()
            result = env.step(CountAction(message="in a loop"))
            return result.observation.echoed, env.state().step_count

    assert asyncio.run(notebook_cell()) == ("in a loop", 1)


def test_sync_clients_from_many_threads(count_url: str) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with CountClient(count_url).sync() as env:
                env.reset()
                for j in range(20):
                    assert env.step(CountAction(message=f"{i}")).observation.count == j + 1
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def test_async_client_refuses_plain_with(count_url: str) -> None:
    with pytest.raises(TypeError, match=r"\.sync\(\)"), CountClient(count_url):
        pass


async def test_bearer_token_is_sent_and_hf_token_only_to_hf_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, str]] = []
    app = create_app(CountEnv, CountAction, CountObservation)

    async def recording(scope, receive, send):  # records handshake headers, then serves the env
        if scope["type"] == "websocket":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    monkeypatch.setenv("HF_TOKEN", "hf_ambient")
    with serve_app(recording) as url:
        async with CountClient(url, token="hf_explicit") as env:
            await env.reset()
        async with CountClient(url) as env:  # 127.0.0.1 is not Hugging Face: no ambient token
            await env.reset()
    assert seen[0]["authorization"] == "Bearer hf_explicit"
    assert "authorization" not in seen[1]
    assert CountClient("https://owner-name.hf.space")._headers["Authorization"] == "Bearer hf_ambient"


def test_base_urls_map_to_the_ws_endpoint() -> None:
    assert ws_url_for("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/ws"
    assert ws_url_for("https://owner-echo-env.hf.space/") == "wss://owner-echo-env.hf.space/ws"
    assert ws_url_for("http://host/prefix/") == "ws://host/prefix/ws"
    assert ws_url_for("ws://host:1/ws") == "ws://host:1/ws"
    for bad in ("", "localhost:8000", "ftp://x", "http://"):
        with pytest.raises(ConfigurationError):
            ws_url_for(bad)


async def test_client_errors_share_one_root(count_url: str) -> None:
    from openenv import EnvClientError, OpenEnvError

    for cls in (EnvConnectionError, EnvTimeoutError, EnvDisconnectedError, EnvServerError, SchemaMismatchError):
        assert issubclass(cls, EnvClientError) and issubclass(cls, OpenEnvError)
