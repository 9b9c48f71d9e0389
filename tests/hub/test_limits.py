"""Abuse limits on the Hub API: body size (413), per-client rate limits with headers (429)."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from hub_service.app import create_app
from hub_service.limits import RateLimiter
from tests.support.servers import serve_app


def test_rate_limit_headers_then_429_then_recovery(hub_settings) -> None:
    settings = hub_settings.model_copy(update={"rate_api_burst": 5, "rate_api_per_minute": 0.5})
    with serve_app(create_app(settings), proxy_headers=False) as url:  # as `openenv hub serve` runs by default
        replies = [httpx.get(f"{url}/api/v1/envs") for _ in range(5)]
        assert all(r.status_code == 200 for r in replies)
        assert [int(r.headers["ratelimit-remaining"]) for r in replies] == [4, 3, 2, 1, 0]
        assert replies[0].headers["ratelimit-limit"] == "5"
        refused = httpx.get(f"{url}/api/v1/envs")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
        # A client cannot claim another address (X-Forwarded-For is ignored unless trusted).
        spoofed = httpx.get(f"{url}/api/v1/envs", headers={"X-Forwarded-For": "10.9.9.9"})
        assert spoofed.status_code == 429
        # Only API paths are limited. (The first request builds the OpenAPI document: half a second
        # quiet, past httpx's default 5 s timeout on a busy machine, as in one CI run.)
        assert "ratelimit-limit" not in httpx.get(f"{url}/openapi.json", timeout=60).headers


def test_a_refused_client_recovers_as_the_bucket_refills(hub_settings) -> None:
    import time

    settings = hub_settings.model_copy(update={"rate_api_burst": 1, "rate_api_per_minute": 60})
    app = create_app(settings)
    # The buckets' clock is stepped by hand: a loaded machine that takes a second per request
    # would otherwise refill the bucket between two requests meant to be back to back.
    now = [time.time()]
    app.state.limiter.use_clock(lambda: now[0])
    with serve_app(app) as url:
        assert httpx.get(f"{url}/api/v1/health").status_code == 200
        refused = httpx.get(f"{url}/api/v1/health")  # one token a second, and no time has passed
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        now[0] += 0.5  # half a token: still refused, and told to come back in a second (rounded up)
        half = httpx.get(f"{url}/api/v1/health")
        assert (half.status_code, half.headers["retry-after"]) == (429, "1")
        now[0] += 0.5
        assert httpx.get(f"{url}/api/v1/health").status_code == 200
        assert httpx.get(f"{url}/api/v1/health").status_code == 429  # that token was the only one


def test_forwarded_client_addresses_when_behind_a_proxy(hub_settings) -> None:
    settings = hub_settings.model_copy(
        update={"rate_api_burst": 1, "rate_api_per_minute": 1, "trust_forwarded_for": True}
    )
    with serve_app(
        create_app(settings), proxy_headers=True, forwarded_allow_ips="127.0.0.1"
    ) as url:  # behind a local proxy
        assert httpx.get(f"{url}/api/v1/envs", headers={"X-Forwarded-For": "1.1.1.1"}).status_code == 200
        assert httpx.get(f"{url}/api/v1/envs", headers={"X-Forwarded-For": "1.1.1.1"}).status_code == 429
        assert httpx.get(f"{url}/api/v1/envs", headers={"X-Forwarded-For": "2.2.2.2"}).status_code == 200


def test_oversized_bodies_are_refused(hub_settings) -> None:
    settings = hub_settings.model_copy(update={"max_body_bytes": 2048, "webhook_secret": SecretStr("s3cret")})
    headers = {"content-type": "application/json", "x-webhook-secret": "s3cret"}
    with serve_app(create_app(settings)) as url:
        big = httpx.post(f"{url}/webhooks/hf", content=b"x" * 10_000, headers=headers)
        assert big.status_code == 413 and big.json()["error"]["code"] == "too_large"

        def chunks():
            for _ in range(10):
                yield b"y" * 1000

        # No Content-Length: the cap holds while the webhook route reads the stream.
        streamed = httpx.post(f"{url}/webhooks/hf", content=chunks(), headers=headers)
        assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "too_large"
        assert httpx.get(f"{url}/api/v1/health").status_code == 200


def test_token_bucket_arithmetic() -> None:
    limiter = RateLimiter({"x": (2, 60)})
    first, second, third = (limiter.hit("x", "c") for _ in range(3))
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    assert third.retry_after_s == 1 and third.remaining == 0
    assert limiter.hit("x", "other").allowed


def test_nul_characters_are_a_400_not_a_database_error(clean_factory, hub_settings) -> None:
    """PostgreSQL cannot store or even compare a NUL; whatever the input, the answer is a 4xx."""
    settings = hub_settings.model_copy(
        update={"webhook_secret": SecretStr("s3cret"), "maintainer_token": SecretStr("t0ken")}
    )
    with serve_app(create_app(settings)) as url:
        for path in (
            "/api/v1/envs?q=%00",
            "/api/v1/envs?tag=a%00b",
            "/api/v1/envs/own%00er/name",
            "/api/v1/envs/owner/name%00/resolve",
            "/api/v1/envs/owner/name/resolve?revision=%00",
            "/api/v1/envs/o%00/n/events",
        ):
            reply = httpx.get(f"{url}{path}")
            assert reply.status_code == 400 and "NUL" in reply.json()["error"]["message"], (path, reply.text)
        hook = httpx.post(
            f"{url}/webhooks/hf",
            headers={"x-webhook-secret": "s3cret"},
            json={
                "event": {"action": "update", "scope": "repo"},
                "repo": {"type": "space", "name": "a\x00/b"},
                "webhook": {"id": "w", "version": 3},
            },
        )
        assert hook.status_code == 422 and "NUL" in hook.json()["error"]["message"]
        yank = httpx.post(
            f"{url}/api/v1/envs/owner/name/versions/main/yank",
            headers={"Authorization": "Bearer t0ken"},
            json={"actor": "me\x00", "reason": "broken build"},
        )
        assert 400 <= yank.status_code < 500 and "NUL" in yank.text
        assert httpx.get(f"{url}/api/v1/envs?q=echo").status_code == 200


def test_shared_buckets_count_like_the_memory_ones_on_both_databases(engine, hub_settings) -> None:
    from hub_service.quota import SharedRateLimiter

    first_process, second_process = SharedRateLimiter(engine, {"x": (2, 60)}), SharedRateLimiter(engine, {"x": (2, 60)})
    first, second, third = first_process.hit("x", "c"), second_process.hit("x", "c"), first_process.hit("x", "c")
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)  # one bucket for both
    assert (first.remaining, second.remaining, third.remaining) == (1, 0, 0)
    assert third.retry_after_s == 1 and third.reset_s == 2 and ("retry-after", "1") in _named(third.headers())
    assert second_process.hit("x", "other").allowed
    long_name = "/run/some/socket/" + "x" * 300  # stored by its hash, still its own bucket
    assert first_process.hit("x", long_name).allowed and first_process.hit("x", long_name).remaining == 0


def test_buckets_that_are_full_again_are_deleted(engine, hub_settings) -> None:
    import time

    from sqlalchemy import text

    from hub_service.quota import SharedRateLimiter

    limiter = SharedRateLimiter(engine, {"x": (1, 6000)}, sweep_every_s=0)  # full again 10 ms after a hit
    limiter.hit("x", "gone")
    time.sleep(1.2)  # kept a second longer than that, for clocks a little apart
    limiter.hit("x", "here")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT client FROM rate_buckets")).scalars().all() == ["here"]


def _named(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode(), v.decode()) for k, v in headers]


def test_a_database_that_is_down_costs_the_limiter_one_warning_not_an_error(caplog, tmp_path) -> None:
    """The API keeps answering (limited per process, with a warning in the log) while the database
    cannot be reached, on PostgreSQL (nothing listening) and on SQLite (no file can be opened)."""
    import logging
    import time

    from fastapi import FastAPI

    from hub_service.db import make_engine
    from hub_service.limits import LimitsMiddleware
    from hub_service.quota import SharedRateLimiter
    from tests.support.servers import free_port

    (tmp_path / "a-folder").mkdir()
    dead = [
        make_engine(f"postgresql+psycopg://hub:pw@127.0.0.1:{free_port()}/hub", connect_args={"connect_timeout": 2}),
        make_engine(f"sqlite:///{tmp_path / 'a-folder'}"),
    ]
    for engine in dead:
        limiter = SharedRateLimiter(engine, {"api": (3, 0.5)}, retry_db_after_s=60)
        app = FastAPI()

        @app.get("/api/v1/ping")
        def ping() -> dict[str, str]:
            return {"pong": "yes"}

        app.add_middleware(LimitsMiddleware, limiter=limiter, routes=[("/api/", "api")], max_body_bytes=4096)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hub_service.limits"), serve_app(app) as url:
            started = time.monotonic()
            replies = [httpx.get(f"{url}/api/v1/ping") for _ in range(4)]
            took = time.monotonic() - started
        assert [r.status_code for r in replies] == [200, 200, 200, 429], engine.url
        assert replies[0].headers["ratelimit-remaining"] == "2" and replies[3].headers["retry-after"]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "counting in this process only for the next 60s" in warnings[0], warnings
        assert took < 10  # one failed attempt, then no waiting on the database per request
        engine.dispose()


async def test_a_play_session_is_refused_with_a_clear_message_while_the_database_is_down(
    hub_settings, tmp_path
) -> None:
    import pytest

    from hub_service.db import make_engine, sessionmaker_for
    from hub_service.play import PlayError
    from hub_service.play.sessions import PlayManager

    (tmp_path / "a-folder").mkdir()
    play = PlayManager(hub_settings, sessionmaker_for(make_engine(f"sqlite:///{tmp_path / 'a-folder'}")))
    try:
        for _ in range(2):  # the tab is free again after a refusal (not "already being started")
            with pytest.raises(PlayError, match="the Hub's database did not answer, so no session was started"):
                await play.open("tab", "v", "local", "echo_env")
        assert play.stats()["sessions"] == 0
    finally:
        await play.aclose()
