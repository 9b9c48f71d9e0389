"""Many sessions opened at once: the client queues its connects to a server instead of flooding its
accept queue, every one gets through, and a dead server still fails them in time."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv import EnvTimeoutError, create_app
from openenv.client import _transport
from openenv.server.run import serve_in_thread
from tests.runtime.envs import CountAction, CountClient, CountEnv, CountObservation
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def count_url() -> Iterator[str]:
    with serve_app(create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=128)) as url:
        yield url


@pytest.fixture
def in_flight(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A gate of 4 handshakes, and the most handshakes seen in flight at once."""
    monkeypatch.setattr(_transport, "CONNECTS_IN_FLIGHT", 4)
    seen = {"now": 0, "most": 0}
    real = _transport.ws_connect

    async def counted(*args, **kwargs):
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
        try:
            return await real(*args, **kwargs)
        finally:
            seen["now"] -= 1

    monkeypatch.setattr(_transport, "ws_connect", counted)
    return seen


async def test_sessions_opened_at_once_all_get_through_a_few_handshakes_at_a_time(
    count_url: str, in_flight: dict[str, int]
) -> None:
    clients = [CountClient(count_url, connect_timeout_s=5) for _ in range(60)]
    try:
        results = await asyncio.gather(*(c.reset() for c in clients))
        assert len(results) == 60 and all(r.observation.count == 0 for r in results)
        assert in_flight["most"] == 4
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_a_connect_cancelled_in_the_queue_gives_its_turn_on(count_url: str, in_flight: dict[str, int]) -> None:
    clients = [CountClient(count_url, connect_timeout_s=5) for _ in range(12)]
    tasks = [asyncio.ensure_future(c.connect()) for c in clients]
    await asyncio.sleep(0)
    tasks[8].cancel()  # still queued behind the first 4
    done = await asyncio.gather(*tasks, return_exceptions=True)
    try:
        assert isinstance(done[8], asyncio.CancelledError)
        assert all(isinstance(d, CountClient) for i, d in enumerate(done) if i != 8)
        assert (await CountClient(count_url).reset()).observation.count == 0  # the gate has its slots back
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_queued_connects_to_a_silent_server_fail_within_the_timeout_not_one_after_another(
    in_flight: dict[str, int],
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # accepts TCP but never speaks HTTP
    port = listener.getsockname()[1]
    try:
        clients = [CountClient(f"http://127.0.0.1:{port}", connect_timeout_s=0.5) for _ in range(40)]
        start = time.monotonic()
        errors = await asyncio.gather(*(c.connect() for c in clients), return_exceptions=True)
        elapsed = time.monotonic() - start
        assert all(isinstance(e, EnvTimeoutError) for e in errors), errors
        assert any("waited its turn" in str(e) for e in errors)
        assert elapsed < 2.5  # 10 turns of 4 handshakes, one after another, would take 5 s
    finally:
        listener.close()


def test_an_env_server_listens_with_the_longest_accept_queue_the_kernel_allows() -> None:
    if not shutil.which("ss"):
        pytest.skip("needs `ss` (iproute2) to read a listening socket's backlog")
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    with serve_in_thread(create_app(CountEnv, CountAction, CountObservation)) as url:
        port = url.rsplit(":", 1)[1]
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    backlog = int(out.split()[2])  # Send-Q of a listening socket: its accept queue's length
    assert backlog == max(2048, min(somaxconn, 65535)), out
