"""Run one claimed job: the stages in order, each recorded with its log and timing.

Every outcome is written down: a stage that fails records why (and the version fails), an error
outside the env (source down, engine gone or restarted, base image unreachable) puts the version in
"waiting" for the infrastructure and gives the job back with backoff (never using up an attempt, and
never blaming the env), and an unexpected bug in this code fails the version with the error rather
than losing it.

Every stage but publish runs against a wall-clock deadline enforced from here, not by the stage:
it runs in a thread of its own, and when the deadline passes the runner aborts it (its server is
stopped and removed, its event loop cancelled), fails the version (fetch: waits for the source),
and moves on, whatever the stage was stuck on.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import session_scope, utcnow
from hub_service.errors import SourceError
from hub_service.evals.models import Eval
from hub_service.evals.service import record_eval
from hub_service.indexer.sources import FetchRefused, HfSource, LocalSource, Source
from hub_service.pipeline import hooks, jobs, stages
from hub_service.pipeline.images_gc import prune_env_images
from hub_service.pipeline.models import Job, StageRun
from hub_service.settings import HubSettings
from openenv.manifest import env_port

__all__ = ["JobRunner", "source_for"]

log = logging.getLogger("hub_service.pipeline")

_ABORT_GRACE_S = 30.0  # how long an aborted stage gets to stop its server before the runner moves on


def source_for(settings: HubSettings, kind: str) -> Source:
    if kind == "local":
        if not settings.local_source:
            raise SourceError("no local source is configured (OPENENV_HUB_LOCAL_SOURCE)")
        return LocalSource(
            settings.local_source,
            owner=settings.local_owner,
            trusted=settings.local_trusted,
            max_bytes=settings.fetch_max_mb << 20,
        )
    if kind == "hf":
        token = settings.hf_token.get_secret_value() if settings.hf_token else None
        return HfSource(settings.hf_endpoint, token, tag=settings.hf_tag, max_bytes=settings.fetch_max_mb << 20)
    raise SourceError(f"unknown source {kind!r}")


class _Heartbeat(threading.Thread):
    """Keeps the job's heartbeat fresh while stages run; notices when the job is taken away."""

    def __init__(self, factory: sessionmaker[Session], job_id: int, worker_id: str, every_s: float) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.factory, self.job_id, self.worker_id, self.every_s = factory, job_id, worker_id, every_s
        self.stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            try:
                if not jobs.heartbeat(self.factory, self.job_id, self.worker_id):
                    self.lost = True
                    return
            except Exception:  # the database may be restarting: keep trying, the job is still ours
                log.warning("heartbeat of job %s failed; retrying", self.job_id, exc_info=True)


class JobRunner:
    """Runs claimed jobs for one worker."""

    def __init__(self, settings: HubSettings, factory: sessionmaker[Session], worker_id: str) -> None:
        self.settings = settings
        self.factory = factory
        self.worker_id = worker_id

    def run(self, claim: jobs.Claim) -> str:
        """Run the job to its end; returns "passed", "failed", "waiting" (for the infrastructure),
        "cancelled" or "lost"."""
        beat = _Heartbeat(self.factory, claim.job_id, self.worker_id, self.settings.heartbeat_s)
        beat.start()
        self._beat = beat
        workdir = self.settings.data_dir / "work" / f"job-{claim.job_id}-{claim.attempt}"
        try:
            outcome = self._run(claim, workdir)
        except _Lost:
            return self._lost(claim)
        finally:
            beat.stop_event.set()
            shutil.rmtree(workdir, ignore_errors=True)
        if outcome in ("passed", "failed"):
            self._prune_images(claim)
        return outcome

    def _prune_images(self, claim: jobs.Claim) -> None:
        """The env's images nobody needs any more go (never failing the job that ran)."""
        try:
            with self.factory() as session:
                version = session.get(EnvVersion, claim.version_id)
                env_id = version.env_id if version is not None and version.builder == "docker" else None
            if env_id is not None:
                prune_env_images(self.settings, self.factory, env_id)
        except Exception:  # the engine went away, say: the next job of the env tries again
            log.warning("removing old images after job %s failed", claim.job_id, exc_info=True)

    # -- orchestration ------------------------------------------------------------------------------

    def _run(self, claim: jobs.Claim, workdir: Path) -> str:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            env = session.get(EnvRecord, version.env_id) if version is not None else None
            if version is None or env is None:
                jobs.finish(self.factory, claim.job_id, self.worker_id, ok=False, error="its version no longer exists")
                return "failed"
            info = {
                "owner": env.owner,
                "name": env.name,
                "sha": version.sha,
                "source": env.source,
                "trusted": env.trusted,
                "ref": version.ref,
            }
            version.failure_stage = version.failure_reason = None
        try:
            folder = self._stage(claim, "fetch", lambda lg, ab: self._fetch(info, workdir, lg))
            report = self._stage(
                claim,
                "validate",
                lambda lg, ab: stages.validate(folder, f"{info['owner']}/{info['name']}", lg, run_code=info["trusted"]),
            )
            self._update(
                claim.version_id,
                validation=report,
                validation_status=report.get("status"),
                manifest=report.get("manifest"),
                readme=_readme(folder),
                port=env_port(folder),
            )
            self._event(claim, "validated", f"validation {report.get('status')}", counts=report.get("summary"))
            built = self._stage(
                claim,
                "build",
                lambda lg, ab: stages.build(
                    self.settings, folder, info["owner"], info["name"], info["sha"], info["trusted"], lg
                ),
            )
            self._update(
                claim.version_id,
                build_status="passed",
                builder=built.builder,
                image_ref=built.image_ref,
                build_seconds=round(built.seconds, 2),
            )
            self._event(claim, "built", f"built with {built.builder} in {built.seconds:.1f}s", image=built.image_ref)
            smoke = self._stage(claim, "smoke", lambda lg, ab: stages.smoke(self.settings, built, folder, lg, ab))
            merged = _merge_reports(report, smoke.runtime_report)
            self._update(
                claim.version_id,
                smoke_status="passed",
                cold_start_s=smoke.cold_start_s,
                step_p50_ms=smoke.step_p50_ms,
                step_p95_ms=smoke.step_p95_ms,
                capacity=smoke.capacity,
                determinism=smoke.determinism,
                reward_check=smoke.reward_check,
                validation=merged,
                validation_status=merged.get("status"),
            )
            rejected = f", {smoke.rejected} of its actions rejected by the env" if smoke.rejected else ""
            self._event(
                claim,
                "smoke_tested",
                f"smoke test passed: cold start {smoke.cold_start_s:.2f}s, step p50 {smoke.step_p50_ms:.1f} ms{rejected}",
                cold_start_s=smoke.cold_start_s,
                step_p50_ms=smoke.step_p50_ms,
                rejected_actions=smoke.rejected,
                first_rejection=smoke.first_rejection,
                rewards_outside_declared_range=smoke.rewards_outside_range,
            )
            self._stage(claim, "publish", lambda lg, ab: self._publish(claim, lg), deadline=False)
        except stages.Transient as exc:
            return self._wait(claim, exc)
        except _Failed as exc:
            self._fail_version(claim, exc.stage, exc.reason, extra=exc.extra)
            jobs.finish(self.factory, claim.job_id, self.worker_id, ok=False, error=f"{exc.stage}: {exc.reason}")
            return "failed"
        jobs.finish(self.factory, claim.job_id, self.worker_id, ok=True)
        return "passed"

    def _stage(self, claim: jobs.Claim, name: str, fn: Any, *, deadline: bool = True) -> Any:
        """Run `fn(log, abort)` as stage `name`, recorded; within its deadline unless `deadline` is False
        (publish: a few database writes, which must not be abandoned half-way)."""
        if self._beat.lost:  # cancelled (a closed pull request) or reclaimed: stop before the next stage
            raise _Lost()
        stage_log = stages.StageLog()
        with session_scope(self.factory) as session:
            run = StageRun(
                job_id=claim.job_id, version_id=claim.version_id, attempt=claim.attempt, stage=name, status="running"
            )
            session.add(run)
            session.flush()
            run_id = run.id
        status, result, failure = "passed", None, None
        start = time.monotonic()
        try:
            result = self._within(claim, name, fn, stage_log) if deadline else fn(stage_log, stages.Abort())
        except stages.ValidationFailed as exc:
            status, failure = (
                "failed",
                _Failed(
                    name,
                    exc.reason,
                    {
                        "validation": exc.report,
                        "validation_status": exc.report.get("status"),
                        "manifest": exc.report.get("manifest"),
                    },
                ),
            )
        except stages.StageFailed as exc:
            status, failure = "failed", _Failed(name, exc.reason)
        except stages.Transient as exc:
            stage_log(
                f"not the env's failure: the infrastructure failed ({exc.code}); the revision waits for it and runs again: {exc}"
            )
            status = "failed"
            self._close_stage(run_id, status, stage_log, start)
            raise
        except FetchRefused as exc:
            status, failure = "failed", _Failed(name, str(exc))
        except SourceError as exc:
            stage_log(f"not the env's failure: its source failed; the revision waits for it and runs again: {exc}")
            self._close_stage(run_id, "failed", stage_log, start)
            raise stages.Transient(str(exc), code=stages.Transient.SOURCE) from exc
        except Exception as exc:  # a bug of ours, or a library's: fail the version with the error, keep the log
            log.exception("stage %s of job %s crashed", name, claim.job_id)
            status, failure = "failed", _Failed(name, f"internal error: {stages.describe_exception(exc)}")
        if failure is not None:
            stage_log(f"FAILED: {failure.reason}")
        self._close_stage(run_id, status, stage_log, start)
        if failure is not None:
            raise failure
        return result

    def _deadline(self, name: str) -> tuple[float, str]:
        if name == "smoke":
            return self.settings.smoke_deadline_s, "OPENENV_HUB_SMOKE_DEADLINE_S"
        return self.settings.stage_deadline_s, "OPENENV_HUB_STAGE_DEADLINE_S"

    def _within(self, claim: jobs.Claim, name: str, fn: Any, stage_log: stages.StageLog) -> Any:
        """`fn(stage_log, abort)` in a thread of its own, stopped from here at the stage's deadline.

        Raises:
            StageFailed: the deadline passed (the env's doing: its server was stopped).
            Transient: the fetch's deadline passed (the source's doing).
            Whatever `fn` raised.
        """
        limit, setting = self._deadline(name)
        abort = stages.Abort()
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["result"] = fn(stage_log, abort)
            except BaseException as exc:  # handed to the runner's thread, which decides what it means
                outcome["error"] = exc

        thread = threading.Thread(target=target, name=f"stage-{name}-job-{claim.job_id}", daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            stage_log(f"the {name} stage ran past its deadline of {limit:g}s ({setting}); stopping it")
            abort.abort()
            thread.join(_ABORT_GRACE_S)
            if thread.is_alive():
                log.warning("stage %s of job %s is still winding down after its abort; moving on", name, claim.job_id)
            if name == "fetch":
                raise stages.Transient(
                    f"fetching the revision took longer than {limit:g}s ({setting})", code=stages.Transient.SOURCE
                )
            if name == "smoke":
                raise stages.StageFailed(
                    f"the smoke stage did not finish within {limit:g}s ({setting}); its server was stopped. "
                    "Does the server answer every request promptly, with a complete reply?"
                )
            raise stages.StageFailed(f"the {name} stage did not finish within {limit:g}s ({setting})")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("result")

    def _close_stage(self, run_id: int, status: str, stage_log: stages.StageLog, start: float) -> None:
        stage_log.close()  # a stage abandoned at its deadline may still be winding down: what it says now is not kept
        with session_scope(self.factory) as session:
            run = session.get(StageRun, run_id)
            if run is not None:
                run.status, run.log, run.finished_at = status, stage_log.text(), utcnow()
                run.seconds = round(time.monotonic() - start, 3)

    # -- stages that touch the database or sources ---------------------------------------------------

    def _fetch(self, info: dict[str, Any], workdir: Path, lg: stages.StageLog) -> Path:
        source = source_for(self.settings, info["source"])
        lg(f"fetching {info['owner']}/{info['name']}@{info['sha'][:12]} from {info['source']}")
        folder = source.fetch(info["owner"], info["name"], info["sha"], workdir / "files")
        files = [p for p in folder.rglob("*") if p.is_file()]
        lg(f"{len(files)} files, {sum(p.stat().st_size for p in files)} bytes")
        return folder

    def _publish(self, claim: jobs.Claim, lg: stages.StageLog) -> None:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            env = session.get(EnvRecord, version.env_id)
            if version.state == "cancelled":  # the pull request closed before the heartbeat told us
                lg(f"{version.sha[:12]} was cancelled; nothing to publish")
                return
            version.state, version.finished_at = "passed", utcnow()
            version.waiting_code = version.waiting_reason = version.waiting_since = None
            baseline = (version.reward_check or {}).get("baseline_returns")
            if baseline and not session.scalar(
                select(Eval.id).where(Eval.version_id == version.id, Eval.source == "baseline")
            ):
                row = record_eval(session, env, version, source="baseline", model="random", returns=baseline)
                lg(f"random baseline: mean return {row.mean_return:.3f} over {row.episodes} episodes")
            if env.sha == version.sha and version.ref == "main":
                apply_verdict(env, version)
                lg(f"{env.repo_id} is passing at {version.sha[:12]}")
            else:
                lg(f"{version.sha[:12]} passed ({version.ref}); the env's current revision is {str(env.sha)[:12]}")
            hooks.version_finished(session, env, version, cause=_cause(claim))

    def _wait(self, claim: jobs.Claim, exc: stages.Transient) -> str:
        """The infrastructure failed this run: the version waits for it, and the job comes back
        after a backoff (sooner when the engine answers again; see `jobs.wake_waiting`)."""
        reason = str(exc)[:4000]
        delay = jobs.wait_for_infrastructure(
            self.factory,
            claim.job_id,
            self.worker_id,
            reason,
            first_s=self.settings.infra_retry_s,
            max_s=self.settings.infra_retry_max_s,
        )
        if delay is None:
            return "lost"
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            if version is None or version.state == "cancelled":
                return "waiting"
            env = session.get(EnvRecord, version.env_id)
            first = version.waiting_code != exc.code or version.waiting_since is None
            version.state = "waiting"
            if first:
                version.waiting_since = utcnow()
            version.waiting_code, version.waiting_reason = exc.code, reason
            if env.sha == version.sha and version.ref == "main" and env.status == "pending":
                env.status = "waiting"
            if first:
                hooks.version_waiting(session, env, version, cause=_cause(claim))
        log.warning(
            "job %s waits for the infrastructure (%s), retried in %.0fs: %s", claim.job_id, exc.code, delay, reason
        )
        return "waiting"

    def _update(self, version_id: int, **values: Any) -> None:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, version_id)
            for key, value in values.items():
                setattr(version, key, value)

    def _fail_version(self, claim: jobs.Claim, stage: str, reason: str, extra: dict[str, Any] | None = None) -> None:
        status_field = {"build": "build_status", "smoke": "smoke_status"}.get(stage)
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            env = session.get(EnvRecord, version.env_id)
            if version.state == "cancelled":  # the pull request closed while this stage ran
                return
            for key, value in (extra or {}).items():
                setattr(version, key, value)
            version.state, version.finished_at = "failed", utcnow()
            version.waiting_code = version.waiting_reason = version.waiting_since = None
            version.failure_stage, version.failure_reason = stage, reason[:4000]
            if status_field:
                setattr(version, status_field, "failed")
            if env.sha == version.sha:
                apply_verdict(env, version)
            hooks.version_finished(session, env, version, cause=_cause(claim))
        log.info("job %s failed at %s: %s", claim.job_id, stage, reason)

    def _event(self, claim: jobs.Claim, kind: str, summary: str, **details: Any) -> None:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            if version is not None:
                hooks.stage_passed(session, version.env_id, version, kind, summary, cause=_cause(claim), **details)

    def _lost(self, claim: jobs.Claim) -> str:
        """The job stopped being ours mid-run: cancelled (its version says so), or reclaimed."""
        with session_scope(self.factory) as session:
            job = session.get(Job, claim.job_id)
            if job is None or job.state != "cancelled":
                log.warning("job %s was taken from worker %s; stopping", claim.job_id, self.worker_id)
                return "lost"
            version = session.get(EnvVersion, claim.version_id)
            if version is not None and version.state not in ("passed", "failed", "cancelled"):
                version.state, version.finished_at = "cancelled", utcnow()
                env = session.get(EnvRecord, version.env_id)
                hooks.version_finished(session, env, version, cause=f"{_cause(claim)}: {job.error or 'cancelled'}")
        log.info("job %s was cancelled; stopped", claim.job_id)
        return "cancelled"


class _Lost(Exception):
    """The heartbeat found the job cancelled or taken by another worker."""


def _cause(claim: jobs.Claim) -> str:
    return f"pipeline job {claim.job_id} (attempt {claim.attempt})"


class _Failed(Exception):
    def __init__(self, stage: str, reason: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason, self.extra = stage, reason, extra


def _readme(folder: Path) -> str | None:
    path = folder / "README.md"
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return None


def _merge_reports(static: dict[str, Any], runtime: dict[str, Any] | None) -> dict[str, Any]:
    if not runtime:
        return static
    from openenv.validation import Report

    return Report.model_validate(static).merge(Report.model_validate(runtime)).model_dump(mode="json")
