"""`/api/v1/envs`: list and search, one env, its versions, reports, logs, and resolve."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog import service
from hub_service.catalog.discovery import validation_parts
from hub_service.catalog.schemas import EnvDetail, EnvPage, ResolveRecord, StageSummary, VersionDetail
from hub_service.catalog.shard_store import current_index, open_served_shard
from hub_service.catalog.snapshot import stream_in_thread
from hub_service.catalog.stage_runs import StageRun
from hub_service.deps import db_session, etag_json, hub_settings
from hub_service.errors import NotFound
from hub_service.settings import HubSettings

router = APIRouter(prefix="/api/v1", tags=["catalog"])

DB = Annotated[Session, Depends(db_session)]
Settings = Annotated[HubSettings, Depends(hub_settings)]


async def _hub_settings(request: Request) -> HubSettings:
    return request.app.state.settings


# The busiest routes (list, detail, resolve) take their settings on the event loop and open their
# session inside the endpoint: one trip to the thread pool a request, where sync dependencies
# cost one each (and a session's generator two).
LoopSettings = Annotated[HubSettings, Depends(_hub_settings)]


def _session(request: Request) -> Session:
    return request.app.state.sessionmaker()


@router.get("/envs", response_model=EnvPage, summary="List and search environments")
def list_envs(
    request: Request,
    settings: LoopSettings,
    q: Annotated[
        str | None,
        Query(description="Words to find in name, title, description, tags (bounds: OPENENV_HUB_SEARCH_MAX_*)"),
    ] = None,
    tag: Annotated[
        list[str], Query(description="Only envs with all these tags (bounds: OPENENV_HUB_FILTER_MAX_*)")
    ] = [],  # noqa: B006 - FastAPI reads it
    capability: Annotated[
        list[str], Query(description="Only envs whose manifest lists these validation capabilities")
    ] = [],  # noqa: B006 - FastAPI reads it
    task: Annotated[list[str], Query(description="Only envs whose manifest's task_distribution has these tasks")] = [],  # noqa: B006 - FastAPI reads it
    check: Annotated[
        list[str],
        Query(
            description="Only envs whose current revision's RFC 008 report has these results: "
            "`ID` (passed, e.g. runtime.episode_determinism) or `ID:STATUS` (pass, fail, skip, error)"
        ),
    ] = [],  # noqa: B006 - FastAPI reads it
    status: Annotated[str | None, Query(description="pending | passing | failing")] = None,
    source: Annotated[str | None, Query(description="hf | local")] = None,
    sort: Annotated[
        str, Query(description="name, -name, likes, -likes, updated, -updated, cold_start, step_latency, -sessions")
    ] = "name",
    deterministic: Annotated[
        str | None,
        Query(
            max_length=10,
            description="true: only envs whose same-seed runs matched; false: only those checked and not deterministic",
        ),
    ] = None,
    reward_checked: Annotated[
        str | None,
        Query(max_length=10, description="true: only envs whose reward check passed; false: only those it flagged"),
    ] = None,
    min_sessions: Annotated[
        int | None, Query(description="Only envs one server of which held at least this many concurrent sessions")
    ] = None,
    limit: Annotated[int | None, Query(description="Envs per page, at most OPENENV_HUB_PAGE_SIZE_MAX")] = None,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    offset: Annotated[
        int, Query(description="Matches skipped before the page, at most OPENENV_HUB_LIST_OFFSET_MAX (or use cursor)")
    ] = 0,
    include_gone: bool = False,
) -> Response:
    query = service.ListQuery(
        q=q,
        tags=tag,
        status=status,
        source=source,
        sort=sort,
        limit=settings.page_size if limit is None else limit,
        cursor=cursor,
        offset=offset,
        include_gone=include_gone,
        capabilities=capability,
        tasks=task,
        checks=check,
        deterministic=service.parse_flag("deterministic", deterministic),
        reward_checked=service.parse_flag("reward_checked", reward_checked),
        min_sessions=min_sessions,
    )
    query.check(settings)
    with _session(request) as db:
        envs, next_cursor, total = service.list_envs(db, query)
        page = EnvPage(items=[service.summary(e) for e in envs], next_cursor=next_cursor, total=total)
    return etag_json(request, page)


@router.get("/envs/{owner}/{name}", response_model=EnvDetail, summary="One environment with its versions")
def get_env(request: Request, owner: str, name: str) -> Response:
    with _session(request) as db:
        return _env_detail(request, db, owner, name)


def _env_detail(request: Request, db: Session, owner: str, name: str) -> Response:
    env = service.get_env(db, owner, name)
    versions = service.env_versions(db, env)
    latest = service.latest_of(env, versions)
    current = latest if latest is not None and latest.id == env.latest_version_id else None
    detail = EnvDetail(
        **service.summary(env).model_dump(),
        deprecation_reason=env.deprecation_reason,
        capacity=current.capacity if current else None,
        determinism=current.determinism if current else None,
        reward_check=current.reward_check if current else None,
        readme=latest.readme if latest else None,
        manifest=latest.manifest if latest else None,
        imported_from=service.imported_from(latest.manifest if latest else None),
        discovery=latest.discovery if latest else None,
        validation_parts=validation_parts(latest.manifest) if latest else {},
        versions=[service.version_summary(v) for v in versions],
        usage={
            "python": f'from openenv import GenericEnvClient\n\nenv = GenericEnvClient.from_hub("{env.repo_id}")',
            "fork": f"openenv fork {env.repo_id}",
        },
    )
    return etag_json(request, detail)


@router.get(
    "/envs/{owner}/{name}/versions/{revision}",
    response_model=VersionDetail,
    summary="One revision: report, stages, figures",
)
def get_version(request: Request, owner: str, name: str, revision: str, db: DB) -> Response:
    env = service.get_env(db, owner, name)
    version = service.get_version(db, env, None if revision in ("latest", "main") else revision)
    stages = service.stage_runs(db, version)
    base = f"/api/v1/envs/{owner}/{name}/versions/{version.sha}/logs"
    detail = VersionDetail(
        **service.version_summary(version).model_dump(),
        capacity=version.capacity,
        determinism=version.determinism,
        reward_check=version.reward_check,
        builder=version.builder,
        image_ref=version.image_ref,
        registry_ref=version.registry_ref,
        image_digest=version.image_digest,
        build_seconds=version.build_seconds,
        validation=version.validation,
        manifest=version.manifest,
        stages=[
            StageSummary(
                stage=s.stage,
                status=s.status,
                attempt=s.attempt,
                seconds=s.seconds,
                started_at=s.started_at,
                finished_at=s.finished_at,
                log_url=f"{base}/{s.stage}?attempt={s.attempt}",
            )
            for s in stages
        ],
    )
    return etag_json(request, detail)


@router.get("/envs/{owner}/{name}/report", summary="The validation report of a revision (latest by default)")
def get_report(
    request: Request,
    owner: str,
    name: str,
    db: DB,
    revision: str | None = None,
    format: Literal["v1", "rfc008"] = "v1",
) -> Response:
    """`format=rfc008`: the RFC 008 report (ValidationReportV2, hub lane); `v1`: this SDK's report."""
    env = service.get_env(db, owner, name)
    version = service.get_version(db, env, revision)
    report = version.rfc008 if format == "rfc008" else version.validation
    if report is None:
        missing = "no RFC 008 report" if format == "rfc008" else "no validation report"
        raise NotFound(
            f"{env.repo_id}@{version.sha[:12]} has {missing} yet (state: {version.state}; a revision checked "
            "before the Hub made RFC 008 reports gets one when it runs again: openenv hub rerun)"
        )
    return etag_json(request, report)


@router.get(
    "/envs/{owner}/{name}/versions/{revision}/logs/{stage}", response_class=PlainTextResponse, summary="A stage's log"
)
def get_log(
    owner: str,
    name: str,
    revision: str,
    stage: str,
    db: DB,
    attempt: Annotated[int | None, Query(ge=1, le=1000, description="Which attempt (latest by default)")] = None,
) -> PlainTextResponse:
    env = service.get_env(db, owner, name)
    version = service.get_version(db, env, None if revision in ("latest", "main") else revision)
    stmt = select(StageRun).where(StageRun.version_id == version.id, StageRun.stage == stage)
    if attempt is not None:
        stmt = stmt.where(StageRun.attempt == attempt)
    run = db.scalars(stmt.order_by(StageRun.id.desc()).limit(1)).first()
    if run is None:
        raise NotFound(
            f"no {stage!r} stage recorded for {env.repo_id}@{version.sha[:12]}; stages: fetch, validate, build, smoke, publish"
        )
    return PlainTextResponse(run.log)


@router.get("/envs/{owner}/{name}/resolve", response_model=ResolveRecord, summary="What a client needs to connect")
def resolve(
    request: Request,
    owner: str,
    name: str,
    settings: LoopSettings,
    revision: str | None = None,
    lock: Annotated[str | None, Query(description="The id of the lock file resolved through (it is renewed)")] = None,
) -> Response:
    with _session(request) as db:
        record = service.resolve(db, settings, owner, name, revision, lock)
        db.commit()  # an explicit pin noted, a lock renewed: what image collection keeps
    return etag_json(request, record)


@router.get(
    "/signing-key",
    summary="The Hub's public key (PEM): the images it publishes are signed with it, in cosign's format",
    response_class=PlainTextResponse,
)
def signing_key(settings: Settings) -> PlainTextResponse:
    from hub_service.signing import public_key

    # `cosign verify --key <this file> --insecure-ignore-tlog <image>@<digest>` accepts the Hub's signatures.
    return PlainTextResponse(public_key(settings), media_type="application/x-pem-file")


@router.get(
    "/catalog/snapshot",
    summary="The catalog (one shard of it, when it is larger than 16 MiB) as a snapshot in upstream "
    "OpenEnv's Environment Card profile (0.1-draft)",
    response_class=StreamingResponse,
)
def catalog_snapshot(
    request: Request,
    settings: Settings,
    first: Annotated[
        str | None,
        Query(alias="from", max_length=300, description="The shard that starts at this env path (the index names it)"),
    ] = None,
    revision: Annotated[
        str | None,
        Query(
            pattern="^[0-9a-f]{64}$", description="The catalog revision the index named (409 when it is not current)"
        ),
    ] = None,
) -> StreamingResponse:
    # Streamed from the shard's kept file, or from batches of rows with its own sessions: memory
    # stays flat for any number of envs.
    current, chunks = open_served_shard(request.app.state.sessionmaker, settings, first, revision)
    index = request.url_for("catalog_index").path
    return StreamingResponse(
        stream_in_thread(chunks),
        media_type="application/json",
        headers={
            "Content-Disposition": 'inline; filename="catalog.json"',
            "Cache-Control": "no-cache",
            "Link": f'<{index}>; rel="index"',
            "OpenEnv-Catalog-Revision": current,
        },
    )


@router.get("/catalog/index", summary="The catalog's snapshot shards: URL, digest, size and env count of each")
def catalog_index(request: Request, settings: Settings) -> Response:
    snapshot = request.url_for("catalog_snapshot").path
    return etag_json(request, current_index(request.app.state.sessionmaker, settings, snapshot))
