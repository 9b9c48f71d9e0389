"""Sessions: isolation, capacity, clean disconnects, idle reaping, where env code runs."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import httpx
import pytest

from openenv import ConfigurationError, EnvClient, EnvDisconnectedError, ServerSettings, create_app
from openenv.errors import ProtocolError
from tests.runtime.envs import AsyncCountEnv, CountAction, CountEnv, CountObservation, CountState, SingletonEnv
from tests.support.servers import ROOT, ProcessServer, serve_app

Client = EnvClient[CountAction, CountObservation, CountState]


async def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def test_concurrent_sessions_are_isolated_and_share_no_threads() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    runtime = app.state.openenv_runtime
    before = threading.active_count()  # what earlier tests left running in this process is not this server's
    with serve_app(app) as url:
        clients = [Client(url) for _ in range(200)]
        await asyncio.gather(*(c.reset(seed=i) for i, c in enumerate(clients)))
        threads_with_200 = threading.active_count()
        assert runtime.sessions.active == 200
        for round_ in range(1, 4):
            results = await asyncio.gather(
                *(c.step(CountAction(message=f"{i}-{round_}")) for i, c in enumerate(clients))
            )
            assert [r.observation.echoed for r in results] == [f"{i}-{round_}" for i in range(200)]
            assert {r.observation.count for r in results} == {round_}
        states = await asyncio.gather(*(c.state() for c in clients))
        assert [s.episode_id for s in states] == [f"ep-{i}" for i in range(200)]
        # No thread per session: env code runs in one pool bounded by the setting.
        assert 0 < runtime.executor.thread_count <= runtime.settings.worker_threads
        print(f"threads: {before} before the server, {threads_with_200} with 200 sessions")
        assert threads_with_200 - before < 40
        await asyncio.gather(*(c.close() for c in clients))
        await wait_for(lambda: runtime.sessions.active == 0)


async def test_disconnect_without_close_frees_the_session_at_once() -> None:
    app = create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=1)
    runtime = app.state.openenv_runtime
    with serve_app(app) as url:
        client = Client(url)
        await client.reset()
        assert runtime.sessions.active == 1
        client._conn.transport.disconnect(graceful=False)  # vanish: no close frame, no goodbye
        await wait_for(lambda: runtime.sessions.active == 0, timeout=2)
        async with Client(url) as again:  # capacity 1: the slot really is free
            assert (await again.reset()).observation.echoed == "ready"


def test_abrupt_disconnects_leave_no_traceback_in_the_server_log() -> None:
    server = ProcessServer([sys.executable, "-m", "openenv.server", "server.app:app"], cwd=ROOT / "envs" / "echo_env")
    try:
        url = server.wait()

        async def vanish(n: int) -> None:
            from echo_env import EchoAction, EchoEnv

            for _ in range(n):
                env = EchoEnv(url)
                await env.reset()
                await env.step(EchoAction(message="bye"))
                env._conn.transport.disconnect(graceful=False)
            await asyncio.sleep(0.3)

        asyncio.run(vanish(20))
        assert httpx.get(f"{url}/health").json()["active_sessions"] == 0
        log = server.log()
        assert "Traceback" not in log and "ERROR" not in log, log
    finally:
        server.stop()


async def test_idle_sessions_are_reaped_and_the_client_is_told() -> None:
    app = create_app(CountEnv, CountAction, CountObservation, settings=ServerSettings(session_idle_timeout_s=0.3))
    runtime = app.state.openenv_runtime
    with serve_app(app) as url:
        async with Client(url) as busy, Client(url) as idle:
            await idle.reset()
            await busy.reset()
            deadline = time.monotonic() + 1.2
            while time.monotonic() < deadline:  # the busy one keeps stepping and survives
                await busy.step(CountAction(message="tick"))
                await asyncio.sleep(0.05)
            with pytest.raises(EnvDisconnectedError, match="idle"):
                await idle.step(CountAction(message="late"))
            assert runtime.sessions.active == 1
            assert (await busy.step(CountAction(message="still here"))).observation.echoed == "still here"
            # reset() opens a fresh session after the old one expired.
            assert (await idle.reset()).observation.echoed == "ready"


def test_reaping_is_on_by_default() -> None:
    assert ServerSettings().session_idle_timeout_s > 0


async def test_non_concurrent_env_gets_one_session() -> None:
    with pytest.raises(ConfigurationError, match="SUPPORTS_CONCURRENT_SESSIONS"):
        create_app(SingletonEnv, CountAction, CountObservation, max_concurrent_envs=4)
    app = create_app(SingletonEnv, CountAction, CountObservation)
    with serve_app(app) as url:
        assert httpx.get(f"{url}/health").json()["max_sessions"] == 1
        async with Client(url) as first:
            await first.reset()
            second = Client(url)
            from openenv import CapacityReachedError

            with pytest.raises(CapacityReachedError) as info:
                await second.reset()
            assert info.value.active_sessions == 1 and info.value.max_sessions == 1
            await second.close()


async def test_default_capacity_is_sized_for_the_machine() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    assert app.state.openenv_runtime.sessions.max_sessions >= 16


async def test_slow_sync_steps_do_not_block_other_sessions() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    with serve_app(app) as url:
        async with Client(url) as slow, Client(url) as fast:
            await slow.reset()
            await fast.reset()
            slow_step = asyncio.create_task(slow.step(CountAction(message="slow", sleep_s=1.0)))
            await asyncio.sleep(0.1)
            start = time.monotonic()
            for _ in range(20):
                await fast.step(CountAction(message="fast"))
            assert time.monotonic() - start < 0.8, "fast session was blocked behind the slow step"
            assert not slow_step.done()
            assert (await slow_step).observation.echoed == "slow"


async def test_fast_sync_steps_move_onto_the_loop_and_slow_ones_move_back() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    runtime = app.state.openenv_runtime
    with serve_app(app) as url:
        async with Client(url) as env:
            await env.reset()
            first = await env.step(CountAction(message="a"))
            assert first.observation.thread.startswith("openenv-env")  # starts in the pool
            for _ in range(150):  # 64 to be promoted, then enough inline that a stray pause is forgiven
                last = await env.step(CountAction(message="b"))
            assert not last.observation.thread.startswith("openenv-env")  # promoted: runs inline
            policy = runtime.executor.policy(CountEnv, "step")
            assert policy.inline
            await env.step(CountAction(message="blip", sleep_s=0.02))  # one slow call is a blip...
            assert policy.inline
            await env.step(CountAction(message="slow", sleep_s=0.02))  # ...a second one close after it...
            assert not policy.inline  # ...sends it back to the pool
            back = await env.step(CountAction(message="c"))
            assert back.observation.thread.startswith("openenv-env")
            for _ in range(80):
                await env.step(CountAction(message="d"))
            assert policy.inline  # fast again: back on the loop
            await env.step(CountAction(message="stall", sleep_s=0.15))  # one call that stalls the loop
            assert not policy.inline  # goes back at once


async def test_pool_calls_that_waited_without_using_the_cpu_do_not_hold_a_fast_method_back() -> None:
    """A worker that waited for the CPU or the GIL (the loop busy with other sessions) is no
    evidence against running inline; a method that burns the CPU now and then is."""
    from openenv.server.execution import Executor

    def waits_now_and_then(i: int) -> int:
        if i % 4 == 3:
            time.sleep(0.003)  # off the CPU for 3 ms, as a worker waiting its turn is
        return i

    def burns_now_and_then(i: int) -> int:
        if i % 4 == 3:
            end = time.thread_time() + 0.003
            while time.thread_time() < end:  # 3 ms of this thread's own CPU
                pass
        return i

    executor = Executor(max_threads=2)
    try:
        waiter = executor.policy(CountEnv, "step")
        burner = executor.policy(CountEnv, "reset")
        for i in range(100):
            await executor.call(waiter, waits_now_and_then, (i,), {}, None)
        for i in range(100):
            await executor.call(burner, burns_now_and_then, (i,), {}, None)
        assert waiter.inline, "75 fast calls and 25 that only waited should move it onto the loop"
        assert not burner.inline, "a method that uses 3 ms of CPU every fourth call must stay in the pool"
    finally:
        executor.shutdown()


async def test_a_full_garbage_collection_during_a_call_is_not_held_against_the_method() -> None:
    """A full collection pauses every thread; an inline call it fell in stays inline."""
    import gc

    from openenv.server.execution import Executor

    def collects() -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < 0.15:  # past the stall bound, however fast the machine
            gc.collect()

    executor = Executor(max_threads=1)
    policy = executor.policy(CountEnv, "step")
    policy.inline = True
    await executor.call(policy, collects, (), {}, None)
    assert policy.inline, "a call that only paid for a full collection must not leave the loop"
    await executor.call(policy, time.sleep, (0.15,), {}, None)
    assert not policy.inline, "a call that itself stalls the loop still goes back to the pool"
    executor.shutdown()


async def test_thread_mode_never_runs_inline() -> None:
    class Blocking(CountEnv):
        EXECUTION = "thread"

    app = create_app(Blocking, CountAction, CountObservation)
    with serve_app(app) as url:
        async with Client(url) as env:
            await env.reset()
            for _ in range(80):
                result = await env.step(CountAction(message="x"))
            assert result.observation.thread.startswith("openenv-env")


async def test_async_env_runs_on_the_loop_and_honours_timeouts() -> None:
    app = create_app(AsyncCountEnv, CountAction, CountObservation)
    with serve_app(app) as url:
        async with Client(url) as env:
            await env.reset()
            result = await env.step(CountAction(message="a"))
            assert result.observation.count == 1
            assert not result.observation.thread.startswith("openenv-env")
            start = time.monotonic()
            with pytest.raises(ProtocolError, match="TIMEOUT") as info:
                await env.step(CountAction(message="slow", sleep_s=5), timeout_s=0.2)
            assert info.value.code == "TIMEOUT"
            assert time.monotonic() - start < 2
            assert (await env.step(CountAction(message="b"))).observation.count == 2


async def test_sync_step_timeout_reports_timeout() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    with serve_app(app) as url:
        async with Client(url) as env:
            await env.reset()
            with pytest.raises(ProtocolError) as info:
                await env.step(CountAction(message="slow", sleep_s=2), timeout_s=0.1)
            assert info.value.code == "TIMEOUT"


async def test_server_shutdown_closes_every_env() -> None:
    app = create_app(CountEnv, CountAction, CountObservation)
    before = CountEnv.closed
    with serve_app(app) as url:
        clients = [Client(url) for _ in range(5)]
        await asyncio.gather(*(c.reset() for c in clients))
    # 5 session envs + the warm spare built at start-up (or used by a session).
    assert CountEnv.closed - before >= 5
    for c in clients:
        await c.close()
