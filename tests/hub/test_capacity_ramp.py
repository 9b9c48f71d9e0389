"""The capacity ramp waits for the sessions it closed to be released before the next level: a
server that allows one session (and, like upstream's, does not count them in /health) reads 1."""

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
    """An ASGI wrapper that delivers the end of a WebSocket session to the server half a second
    late, as a busy server or a slow network does: the client has gone, the slot is not yet free."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)

        async def late_end() -> Any:
            message = await receive()
            ending = message["type"] == "websocket.disconnect" or '"close"' in (message.get("text") or "")
            if ending:
                await asyncio.sleep(0.5)
            return message

        return await self.app(scope, late_end, send)


def _one_session_server() -> Any:
    app = create_app(CountEnv, CountAction, CountObservation, max_concurrent_envs=1)

    @app.middleware("http")
    async def upstream_health(request: Any, call_next: Any) -> Any:
        if request.url.path == "/health":  # upstream's /health: a constant, no session counts to wait on
            return JSONResponse({"status": "healthy"})
        return await call_next(request)

    return SlowRelease(app)


def _ctx(url: str) -> TrustContext:
    settings = SimpleNamespace(
        step_timeout_s=10.0,
        smoke_message_max_mb=8.0,
        capacity_max_sessions=4,
        capacity_budget_s=60.0,
        capacity_steps=2,
        capacity_p99_ms=5000.0,
        capacity_leak_sessions=3,
    )
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
