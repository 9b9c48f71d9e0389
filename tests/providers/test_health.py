"""The health wait: sees a server as soon as it is ready, fails fast and clearly otherwise."""

from __future__ import annotations

import asyncio
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from openenv.client.providers._health import probe, wait_healthy
from openenv.errors import ProviderStartError
from tests.support.servers import free_port, serve_app


def _app(ready_after_s: float, body: dict | None = None) -> Starlette:
    born = time.monotonic()

    async def health(request):
        if body is not None:
            return JSONResponse(body, status_code=503)
        if time.monotonic() - born < ready_after_s:
            return JSONResponse({"status": "starting"}, status_code=503)
        return JSONResponse({"status": "healthy"})

    return Starlette(routes=[Route("/health", health)])


async def test_ready_server_is_seen_at_once() -> None:
    with serve_app(_app(0)) as url:
        waited = await wait_healthy(url, timeout_s=5)
    assert waited < 0.1


async def test_waits_through_starting_and_sees_ready_within_a_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured by the wait's own schedule, not the wall clock: on a loaded machine (a CI run's
    parallel workers and builds) a round trip to the server may take a second, which says nothing
    about how often the wait asks (a wall-clock bound of 0.8 s failed there at 1.98 s)."""
    from openenv.client.providers import _health

    asked: list[float] = []

    class Clock:  # the wait's asyncio, its pauses recorded
        def __getattr__(self, name: str) -> object:
            return getattr(asyncio, name)

        async def sleep(self, seconds: float) -> None:
            asked.append(seconds)
            await asyncio.sleep(seconds)

    monkeypatch.setattr(_health, "asyncio", Clock())
    answers: list[int] = []
    app = _app(0.6)
    app.add_middleware(_Recorder, answers=answers)
    with serve_app(app) as url:
        started = time.monotonic()
        await wait_healthy(url, timeout_s=10)
        elapsed = time.monotonic() - started
    # ready 0.6 s after the app was made: the wait went through "starting" and stopped at the first 200
    assert elapsed > 0.3 and answers[-1] == 200 and answers.count(200) == 1 and answers[0] == 503
    # polls are at most 50 ms apart in the first seconds, however long each round trip took
    assert asked and max(asked) <= 0.05, asked


class _Recorder:
    """ASGI middleware: the status of every answer the app gave, in order."""

    def __init__(self, app, answers: list[int]) -> None:
        self.app, self.answers = app, answers

    async def __call__(self, scope, receive, send) -> None:
        async def sent(message) -> None:
            if message["type"] == "http.response.start":
                self.answers.append(message["status"])
            await send(message)

        await self.app(scope, receive, sent)


async def test_unhealthy_server_fails_fast_with_its_reason() -> None:
    with serve_app(_app(0, {"status": "unhealthy", "error": "EchoEnvironment() raised KeyError"})) as url:
        started = time.monotonic()
        with pytest.raises(ProviderStartError, match="unhealthy: EchoEnvironment\\(\\) raised KeyError"):
            await wait_healthy(url, timeout_s=10)
    assert time.monotonic() - started < 1


async def test_nothing_listening_times_out_with_a_hint() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ProviderStartError, match=r"did not answer /health with 200 within 0.5s.*startup_timeout_s"):
        await wait_healthy(url, timeout_s=0.5)
    assert time.monotonic() - started < 1.5


async def test_exit_reason_ends_the_wait() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def gone() -> str:
        return "the server process exited with code 1"

    started = time.monotonic()
    with pytest.raises(ProviderStartError, match="stopped before it was ready: the server process exited with code 1"):
        await wait_healthy(url, timeout_s=30, exit_reason=gone)
    assert time.monotonic() - started < 1


async def test_probe_reads_status_and_body() -> None:
    with serve_app(_app(0)) as url:
        status, body = await probe(url)
    assert status == 200 and b"healthy" in body
    with pytest.raises(OSError):
        await asyncio.wait_for(probe(f"http://127.0.0.1:{free_port()}"), 5)
