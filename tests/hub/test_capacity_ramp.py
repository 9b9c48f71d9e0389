"""The capacity ramp waits for the sessions it closed to be released before the next level: a
server that allows one session (and, like upstream's, does not count them in /health) reads 1.
Issue 47 (item 10): that wait is the server's release time, measured apart from its capacity: a
server that releases slowly still reads the sessions it holds, with its release time beside them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from starlette.responses import JSONResponse

from hub_service.pipeline import trust
from hub_service.pipeline.trust import TrustContext
from openenv import create_app
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import serve_app


class SlowRelease:
    """An ASGI wrapper that delivers the end of a WebSocket session to the server `delay_s` (half a
    second) late, as a busy server or a slow network does: the client has gone, the slot is not yet free."""

    def __init__(self, app: Any, delay_s: float = 0.5) -> None:
        self.app, self.delay_s = app, delay_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)

        async def late_end() -> Any:
            message = await receive()
            ending = message["type"] == "websocket.disconnect" or '"close"' in (message.get("text") or "")
            if ending:
                await asyncio.sleep(self.delay_s)
            return message

        return await self.app(scope, late_end, send)


def _one_session_server(sessions: int = 1, release_s: float = 0.5) -> Any:
    app = create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=sessions)

    @app.middleware("http")
    async def upstream_health(request: Any, call_next: Any) -> Any:
        if request.url.path == "/health":  # upstream's /health: a constant, no session counts to wait on
            return JSONResponse({"status": "healthy"})
        return await call_next(request)

    return SlowRelease(app, release_s)


def _ctx(url: str, **settings_: Any) -> TrustContext:
    defaults = {
        "step_timeout_s": 10.0,
        "smoke_message_max_mb": 8.0,
        "capacity_max_sessions": 4,
        "capacity_budget_s": 60.0,
        "capacity_steps": 2,
        "capacity_p99_ms": 5000.0,
        "capacity_leak_sessions": 3,
        "trust_release_grace_s": 5.0,
    }
    settings = SimpleNamespace(**{**defaults, **settings_})
    return TrustContext(
        settings=settings,  # type: ignore[arg-type]
        url=url,
        provider=None,
        action_schema=CountAction.model_json_schema(),
        declared=SimpleNamespace(varying_fields=(), stochastic=False),
        image_ref=None,
        figures={},
        log=lambda _: None,
    )


async def test_a_one_session_server_holds_one_session_and_no_leak_is_flagged() -> None:
    with serve_app(_one_session_server()) as url:
        ctx = _ctx(url)
        trust.random_actions(ctx, 1)  # (its first import is slow: done here, so the ramp follows the close at once)
        # What the memory measurement does just before the ramp: a session opened and closed.
        client = trust.session_client(ctx)
        await client.reset(seed=0)
        await client.close()
        ramp = await trust._ramp(ctx, None)
        leaks = await trust._leaks(ctx)
    assert ramp["sessions_held"] == 1, ramp
    assert [level["sessions"] for level in ramp["ramp"]] == [1, 2]
    assert (
        ramp["stopped_because"].startswith("1 of 2 sessions failed") and "CAPACITY_REACHED" in ramp["stopped_because"]
    )
    assert leaks == []


async def test_a_slow_release_is_measured_apart_and_not_read_as_less_capacity() -> None:
    """Two sessions at once, each place freed 1.6 s after its session closed: longer than the
    ramp's whole time budget here (1.2 s). The ramp still reads 2, and the wait as release time.
    (The budget is not smaller: the ramp's own work, a few milliseconds on a quiet machine, took
    over 0.4 s on a busy one, and a budget that small then ran out before the cap was reached.)"""
    with serve_app(_one_session_server(sessions=2, release_s=1.6)) as url:
        ctx = _ctx(url, capacity_budget_s=1.2, trust_release_grace_s=4.0)
        trust.random_actions(ctx, 1)
        client = trust.session_client(ctx)
        await client.reset(seed=0)
        await client.close()
        ramp = await trust._ramp(ctx, None)
    assert ramp["sessions_held"] == 2, ramp
    assert [level["sessions"] for level in ramp["ramp"]] == [1, 2, 4], ramp
    assert "CAPACITY_REACHED" in ramp["stopped_because"] and "waiting 4s" in ramp["stopped_because"], ramp
    assert 1.3 < ramp["release_s"] < 4.0, ramp  # the server's, told apart (the ramp's budget was 1.2 s)


async def test_a_ramp_out_of_time_before_one_session_is_unmeasured_not_zero() -> None:
    """A busy host can spend the ramp's whole budget before one session is held: that measured
    nothing, so the card says unmeasured (no capacity, no badge), never that the env holds 0."""
    with serve_app(_one_session_server()) as url:
        ctx = _ctx(url, capacity_budget_s=0.0)
        ramp = await trust._ramp(ctx, None)
    assert ramp["sessions_held"] is None and "time budget" in ramp["stopped_because"], ramp


async def test_a_server_too_slow_at_one_session_holds_zero_and_earns_no_capacity() -> None:
    """Slower than the p99 bound at one session is a measurement: 0 held. The catalog lists no
    capacity for it (a capacity is one session or more), so it earns no badge."""
    from hub_service.catalog.models import EnvRecord, EnvVersion
    from hub_service.catalog.service import apply_verdict, badges
    from hub_service.catalog.states import VersionState

    with serve_app(_one_session_server()) as url:
        ctx = _ctx(url, capacity_p99_ms=0.0)
        trust.random_actions(ctx, 1)
        ramp = await trust._ramp(ctx, None)
    assert ramp["sessions_held"] == 0 and "p99 step latency" in ramp["stopped_because"], ramp
    env = EnvRecord(sessions_held=5)
    version = EnvVersion(ref="main", state=VersionState.PASSED, capacity={**ramp, "flags": []})
    apply_verdict(env, version)
    assert env.sessions_held is None and "capacity" not in badges(env)
    apply_verdict(env, EnvVersion(ref="main", state=VersionState.PASSED, capacity={**ramp, "sessions_held": 3}))
    assert env.sessions_held == 3 and "capacity" in badges(env)
