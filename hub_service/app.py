"""`create_app(settings)`: the Hub service's FastAPI app (JSON API; the website mounts at `/`)."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError

from hub_service.assembly import assemble
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.errors import HubError
from hub_service.limits import LimitsMiddleware
from hub_service.quota import SharedRateLimiter
from hub_service.settings import HubSettings, get_settings

__all__ = ["create_app"]

API_VERSION = "1.0.0"
log = logging.getLogger("hub_service")


def create_app(settings: HubSettings | None = None, *, run_migrations: bool = True) -> FastAPI:
    """Build the service. Migrates the database to the latest schema unless told not to."""
    settings = settings or get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if run_migrations:
        migrate(settings.sqlalchemy_url)
    assemble(settings)  # the lifecycle's listeners (a maintainer's re-run moves a revision too)
    engine = make_engine(settings.sqlalchemy_url)
    limits_engine = _limits_engine(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if getattr(app.state, "play", None) is not None:  # the website's play sessions and the envs they run on
            await app.state.play.aclose()
        engine.dispose()
        limits_engine.dispose()

    app = FastAPI(
        title="OpenEnv Hub",
        version=API_VERSION,
        description="Find environments that work, see their reports, and resolve them to a live endpoint.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = sessionmaker_for(engine)
    app.state.limiter = _limiter(settings, limits_engine)
    app.add_middleware(
        LimitsMiddleware,
        limiter=app.state.limiter,
        routes=[("/api/", "api"), ("/webhooks/", "webhook")],
        max_body_bytes=settings.max_body_bytes,
    )

    @app.exception_handler(HubError)
    async def _hub_error(_: Request, exc: HubError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
        return JSONResponse(
            {"error": {"code": "invalid_request", "message": "the request is not valid", "errors": errors}},
            status_code=422,
        )

    @app.exception_handler(DataError)
    async def _out_of_range(request: Request, exc: DataError) -> JSONResponse:
        # A value the database cannot hold (a number out of its range, text it cannot store) came
        # from the request: the routes bound their parameters, this is the net under them.
        log.warning("%s %s: the database refused a value: %s", request.method, request.url.path, exc.orig)
        return JSONResponse(
            {
                "error": {
                    "code": "invalid_request",
                    "message": "a value in the request is out of range for this Hub; check the numbers and text you sent",
                }
            },
            status_code=422,
        )

    @app.get("/api/v1/health", tags=["service"])
    def health() -> dict[str, Any]:
        from sqlalchemy import text
        from sqlalchemy.orm import Session

        from hub_service.indexer.drift import drift_summary
        from hub_service.queue.jobs import waiting_summary

        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            # what the reconcile had to correct (issue 30): drift the webhooks did not bring
            with Session(bind=conn) as session:
                drift = drift_summary(session)
                waiting = waiting_summary(session)
        return {"status": "ok", "drift": drift, **waiting}

    from hub_service.catalog.routes import router as catalog_router

    app.include_router(catalog_router)
    from hub_service.evals.routes import router as evals_router  # leaderboards, submitted runs

    app.include_router(evals_router)
    from hub_service.live import routers as live_routers  # webhooks, audit trail, health, maintainer actions

    for router in live_routers():
        app.include_router(router)
    if settings.website:  # last: the website is mounted at / behind every API route
        from hub_service.web import mount_website  # server-rendered pages, the Gradio panel behind them

        mount_website(app)
    return app


def _limits_engine(settings: HubSettings) -> Engine:
    """The rate limiter's own engine: on PostgreSQL it gives up quickly (a limiter that waits on a
    database that is gone would hold every request), and its pool is not shared with slow queries."""
    url = settings.sqlalchemy_url
    if url.startswith("sqlite"):
        return make_engine(url)
    timeout_s = settings.limits_db_timeout_s
    options = f"-c statement_timeout={int(timeout_s * 1000)} -c lock_timeout={int(timeout_s * 1000)}"
    # No pre-ping: a hit is one round trip, not two. A connection that went stale (the server
    # restarted) fails one hit, which is then counted locally, and the pool starts afresh.
    return make_engine(
        url,
        pool_pre_ping=False,
        connect_args={"connect_timeout": max(1, math.ceil(timeout_s)), "options": options},
    )


def _limiter(settings: HubSettings, engine: Engine) -> SharedRateLimiter:
    return SharedRateLimiter(
        engine,
        {
            "api": (settings.rate_api_burst, settings.rate_api_per_minute),
            "webhook": (settings.rate_webhook_burst, settings.rate_webhook_per_minute),
            "play": (settings.rate_play_burst, settings.rate_play_per_minute),
            "model": (settings.rate_model_burst, settings.rate_model_per_minute),
            "web": (settings.rate_web_burst, settings.rate_web_per_minute),
        },
        retry_db_after_s=settings.limits_db_retry_s,
    )
