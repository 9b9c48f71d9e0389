"""The pull-request bot: check each open pull request's head on an indexed Space, and keep ONE
comment on it up to date with the verdict.

`sync_pr` (a task, queued by webhooks and the reconcile) reads the pull request from the Hub: an
open one gets its head checked by the ordinary pipeline (an EnvVersion with ref `refs/pr/N`, which
never touches the env's main status); a closed or merged one has its jobs cancelled, and so has a
deleted one (or one whose Space is gone), whose check becomes `deleted`. The sync compares the
Hub's answer with the check's state, so it may run any number of times for one change. When a version
finishes, `version_finished` queues `report_pr` for every open pull request at that sha; the report
posts the comment once and edits it afterwards, under a lease so two workers never post twice.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from hub_service import lifecycle
from hub_service.audit.service import record
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.db import affected_rows, session_scope, utcnow
from hub_service.prbot.comment import MARKER, ReportView, render
from hub_service.prbot.hub import HubPullRequests, PullRequests
from hub_service.prbot.models import PullRequestCheck
from hub_service.queue import jobs
from hub_service.queue.kinds import JobKind, JobState
from hub_service.queue.models import Job
from hub_service.queue.tasks import Deferred, TaskContext
from hub_service.settings import HubSettings

__all__ = ["client_for", "close_checks", "reconcile_open", "report_pr", "sync_pr", "version_finished"]

PRIORITY_PIPELINE = 60  # before the crawl's pipeline jobs (100): a contributor is waiting
PRIORITY_REPORT = 10
_OPEN = ("open", "draft")


def client_for(settings: HubSettings) -> PullRequests:
    token = settings.hf_token.get_secret_value() if settings.hf_token else None
    return HubPullRequests(settings.hf_endpoint, token)


# -- sync: the pull request's state and head ---------------------------------------------------------


def sync_pr(ctx: TaskContext, payload: dict[str, Any]) -> str:
    """Bring the check of pull request `payload["num"]` on `payload["repo"]` in line with the Hub."""
    repo, num = str(payload["repo"]), int(payload["num"])
    cause = str(payload.get("cause") or "pull request sync")
    owner, _, name = repo.partition("/")
    with ctx.factory() as session:
        env_id = _env_id(session, owner, name)
    if env_id is None:
        with session_scope(ctx.factory) as session:  # a Space gone from the catalog leaves no check open
            closed = close_checks(session, owner, name, cause, only=num)
        return f"{repo} is not an indexed Space" + (f"; its check of #{num} is closed" if closed else "")
    info = client_for(ctx.settings).info(repo, num)
    if info is None:  # the Hub has no such discussion (deleted), or no such Space we may see
        with session_scope(ctx.factory) as session:
            closed = close_checks(session, owner, name, cause, only=num)
        return f"{repo} #{num} is not on the Hub" + ("; its check is closed" if closed else "")
    if not info.is_pull_request:
        return f"{repo} #{num} is not a pull request"
    with session_scope(ctx.factory) as session:
        env = session.get(EnvRecord, env_id)
        if env is None:  # removed since the lookup above
            return f"{repo} is not an indexed Space"
        check = session.scalar(
            select(PullRequestCheck).where(PullRequestCheck.env_id == env_id, PullRequestCheck.num == num)
        )
        if check is None:
            check = PullRequestCheck(env_id=env_id, num=num)
            session.add(check)
        check.status, check.title = info.status, info.title[:300]
        session.flush()
        if info.status not in _OPEN:
            stopped = _stop(session, env, check, f"pull request #{num} was {info.status}", cause)
            if stopped:
                _queue_report(session, check)  # the comment says the checks stopped
            return f"{repo} #{num} is {info.status}; {stopped} job(s) stopped"
        if info.head_sha is None:
            return f"{repo} #{num} has no refs/pr/{num} yet"
        if check.head_sha != info.head_sha and check.version_id is not None:
            _stop(session, env, check, f"refs/pr/{num} moved to {info.head_sha[:12]}", cause)
        version, queued = _version_for(session, env, num, info.head_sha, ctx.settings.job_max_attempts)
        check.head_sha, check.version_id = info.head_sha, version.id
        if queued:
            record(
                session,
                env,
                "pr_checked",
                f"pull request #{num} at {info.head_sha[:12]} queued for checks",
                cause=cause,
                version=version,
                pr=num,
            )
        _queue_report(session, check)
        return f"{repo} #{num} head {info.head_sha[:12]}: version {version.state}"


def close_checks(session: Session, owner: str, name: str, cause: str, only: int | None = None) -> int:
    """Close the open checks of `owner/name` (of pull request `only`, or all of them) because the
    Hub no longer has the pull request or the Space: each becomes `deleted` and its pipeline job
    is cancelled. No comment: there is nothing left on the Hub to comment on. Returns how many."""
    query = (
        select(PullRequestCheck, EnvRecord)
        .join(EnvRecord, EnvRecord.id == PullRequestCheck.env_id)
        .where(
            EnvRecord.source == "hf",
            EnvRecord.owner == owner,
            EnvRecord.name == name,
            PullRequestCheck.status.in_(_OPEN),
        )
    )
    if only is not None:
        query = query.where(PullRequestCheck.num == only)
    closed = 0
    for check, env in session.execute(query).all():
        gone = "the Space is gone" if env.gone else f"pull request #{check.num} was deleted"
        check.status = "deleted"
        stopped = _stop(session, env, check, gone, cause)
        record(
            session,
            env,
            "pr_checked",
            f"{gone}; its check is closed, {stopped} job(s) stopped",
            cause=cause,
            pr=check.num,
        )
        closed += 1
    return closed


def _env_id(session: Session, owner: str, name: str) -> int | None:
    return session.scalar(
        select(EnvRecord.id).where(
            EnvRecord.source == "hf", EnvRecord.owner == owner, EnvRecord.name == name, EnvRecord.gone.is_(False)
        )
    )


def _version_for(session: Session, env: EnvRecord, num: int, sha: str, max_attempts: int) -> tuple[EnvVersion, bool]:
    """The version of `sha` (made for refs/pr/num if new) with a pipeline job when it needs one."""
    version = session.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id, EnvVersion.sha == sha))
    if version is None:
        version = EnvVersion(env_id=env.id, sha=sha, ref=f"refs/pr/{num}", state=VersionState.QUEUED)
        session.add(version)
        session.flush()
    elif version.state != VersionState.CANCELLED:
        return version, False  # checked already (or being checked): its verdict is reported as it is
    else:
        lifecycle.move(session, env, version, VersionState.QUEUED, cause=f"refs/pr/{num} is checked again")
    jobs.enqueue(session, version.id, priority=PRIORITY_PIPELINE, max_attempts=max_attempts)
    return version, True


def _stop(session: Session, env: EnvRecord, check: PullRequestCheck, reason: str, cause: str) -> int:
    """Cancel the pipeline job of the check's current version, unless main or another open
    pull request still needs that version. A version waiting for the infrastructure counts: its
    job sits queued until a backoff ends, and would run then to a verdict on a closed pull
    request. Returns how many jobs were cancelled."""
    if check.version_id is None:
        return 0
    version = session.get(EnvVersion, check.version_id)
    if (
        version is None
        or version.state in lifecycle.FINISHED
        or not version.ref.startswith("refs/pr/")
        or version.sha == env.sha
    ):
        return 0
    others = session.scalar(
        select(PullRequestCheck.id)
        .where(
            PullRequestCheck.version_id == version.id,
            PullRequestCheck.id != check.id,
            PullRequestCheck.status.in_(_OPEN),
        )
        .limit(1)
    )
    if others is not None:
        return 0
    job_ids = list(
        session.scalars(
            select(Job.id).where(
                Job.version_id == version.id,
                Job.kind == JobKind.PIPELINE,
                Job.state.in_((JobState.QUEUED, JobState.RUNNING)),
            )
        )
    )
    cancelled = jobs.cancel(session, job_ids, reason)
    lifecycle.move(session, env, version, VersionState.CANCELLED, cause=f"{cause}: {reason}")
    return cancelled


def _queue_report(session: Session, check: PullRequestCheck) -> None:
    jobs.enqueue_task(session, "pr_report", f"pr-report:{check.id}", {"check": check.id}, priority=PRIORITY_REPORT)


def version_finished(session: Session, env: EnvRecord, version: EnvVersion) -> None:
    """`version` finished (a lifecycle listener, registered by `hub_service.assembly`): queue a
    report for each open pull request at its sha."""
    for check in session.scalars(
        select(PullRequestCheck).where(
            PullRequestCheck.env_id == env.id,
            PullRequestCheck.head_sha == version.sha,
            PullRequestCheck.status.in_(_OPEN),
        )
    ):
        _queue_report(session, check)


def reconcile_open(session: Session, cause: str = "reconcile") -> int:
    """Queue a sync of every open pull request the bot follows (catches missed webhooks)."""
    rows = session.execute(
        select(PullRequestCheck.num, EnvRecord.owner, EnvRecord.name, EnvRecord.gone)
        .join(EnvRecord, EnvRecord.id == PullRequestCheck.env_id)
        .where(PullRequestCheck.status.in_(_OPEN))
    ).all()
    for num, owner, name, gone in rows:
        if gone:  # the Space left the catalog: nothing to ask the Hub, the check just closes
            close_checks(session, owner, name, cause, only=num)
            continue
        repo = f"{owner}/{name}"
        jobs.enqueue_task(
            session, "pr_sync", f"pr:{repo}#{num}", {"repo": repo, "num": num, "cause": cause}, priority=40
        )
    return len(rows)


# -- report: the one comment ----------------------------------------------------------------------------


def report_pr(ctx: TaskContext, payload: dict[str, Any]) -> str:
    """Post or edit the bot's comment on a pull request to show its check's current state."""
    check_id = int(payload["check"])
    view, comment_id = _take_lease(ctx, check_id)
    if view is None:
        return f"pull request check {check_id}: nothing new to report"
    hub = client_for(ctx.settings)
    text = render(view)
    try:
        if comment_id is None:
            comment_id = hub.find(view.repo_id, view.num, MARKER)
        if comment_id is None or not hub.edit(view.repo_id, view.num, comment_id, text):
            comment_id = hub.post(view.repo_id, view.num, text)
    except BaseException:
        _release(ctx, check_id, None, None)
        raise
    _release(ctx, check_id, comment_id, view)
    return f"{view.repo_id} #{view.num}: comment {comment_id} shows {view.state}"


def _take_lease(ctx: TaskContext, check_id: int) -> tuple[ReportView | None, str | None]:
    """Take the check's comment lease and read what to show; (None, _) when there is nothing new.

    Raises:
        Deferred: another worker holds the lease.
    """
    stale = utcnow() - dt.timedelta(seconds=ctx.settings.job_stale_after_s * 2)
    with session_scope(ctx.factory) as session:
        taken = affected_rows(
            session.execute(
                update(PullRequestCheck)
                .where(
                    PullRequestCheck.id == check_id,
                    or_(
                        PullRequestCheck.lease_by.is_(None),
                        PullRequestCheck.lease_by == ctx.worker_id,
                        PullRequestCheck.lease_at < stale,
                    ),
                )
                .values(lease_by=ctx.worker_id, lease_at=utcnow())
            )
        )
        check = session.get(PullRequestCheck, check_id)
        if check is None:
            return None, None
        if not taken:
            raise Deferred(f"worker {check.lease_by} is updating the comment of pull request check {check_id}")
        view = _view(session, ctx.settings, check)
        if view is None or view.key == check.reported:
            check.lease_by = check.lease_at = None
            return None, None
        return view, check.comment_id


def _release(ctx: TaskContext, check_id: int, comment_id: str | None, view: ReportView | None) -> None:
    with session_scope(ctx.factory) as session:
        check = session.get(PullRequestCheck, check_id)
        if check is None:
            return
        check.lease_by = check.lease_at = None
        if view is None:
            return
        check.comment_id, check.reported = comment_id, view.key
        if view.state in (VersionState.PASSED, VersionState.FAILED):
            record(
                session,
                check.env_id,
                "pr_checked",
                f"pull request #{view.num} at {view.sha[:12]} {view.state}; commented on the Hub",
                cause=f"pull request bot (job {ctx.job_id})",
                pr=view.num,
                sha=view.sha,
                comment_id=comment_id,
            )


def _view(session: Session, settings: HubSettings, check: PullRequestCheck) -> ReportView | None:
    env = session.get(EnvRecord, check.env_id)
    version = session.get(EnvVersion, check.version_id) if check.version_id else None
    if env is None or version is None:
        return None
    main = session.get(EnvVersion, env.latest_version_id) if env.latest_version_id else None
    if main is not None and main.state != VersionState.PASSED:
        main = None
    base = f"{settings.public_url.rstrip('/')}/api/v1/envs/{env.owner}/{env.name}/versions/{version.sha}"
    state = version.state
    if check.status not in _OPEN and state not in lifecycle.FINISHED:
        state = VersionState.CANCELLED
    return ReportView(
        repo_id=env.repo_id,
        num=check.num,
        pr_status=check.status,
        sha=version.sha,
        state=state,
        report_url=base,
        validation=version.validation,
        validation_status=version.validation_status,
        rfc008=version.rfc008,
        build_status=version.build_status,
        smoke_status=version.smoke_status,
        failure_stage=version.failure_stage,
        failure_reason=version.failure_reason,
        figures=_figures(version),
        main_sha=main.sha if main else None,
        main_figures=_figures(main) if main else {},
        log_url=f"{base}/logs/{version.failure_stage}"
        if state == VersionState.FAILED and version.failure_stage in ("fetch", "validate", "build", "smoke")
        else None,
        waiting_code=version.waiting_code if state == VersionState.WAITING else None,
        waiting_reason=version.waiting_reason if state == VersionState.WAITING else None,
    )


def _figures(version: EnvVersion) -> dict[str, float | None]:
    return {
        "cold_start_s": version.cold_start_s,
        "step_p50_ms": version.step_p50_ms,
        "step_p95_ms": version.step_p95_ms,
    }
