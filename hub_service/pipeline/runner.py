"""Run one claimed job: the stages in order, each recorded with its log and timing.

Every outcome is written down: a stage that fails records why (and the version fails), an error
outside the env (source down, engine gone or restarted, base image unreachable) puts the version in
"waiting" for the infrastructure and gives the job back with backoff (never using up an attempt, and
never blaming the env), and an unexpected bug in this code fails the version with the error rather
than losing it. The version moves only through `hub_service.lifecycle`, which writes the audit
trail and tells the listeners (the pull-request bot, image collection).

`JobRunner._run` is the job's whole path, top to bottom. Every stage but publish runs against a
wall-clock deadline enforced from outside the stage (hub_service/pipeline/deadline.py): when it
passes, the stage is aborted, the version fails (fetch: waits for the source), and the runner
moves on, whatever the stage was stuck on.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service import lifecycle
from hub_service.audit.service import record
from hub_service.catalog.discovery import read_discovery
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.stage_runs import StageName, StageRun, StageStatus
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope, utcnow
from hub_service.errors import SourceError
from hub_service.evals.models import Eval
from hub_service.evals.service import record_eval
from hub_service.indexer import source_for
from hub_service.indexer.sources import FetchRefused
from hub_service.pipeline import publish, stages
from hub_service.pipeline.deadline import within
from hub_service.queue import jobs
from hub_service.queue.errors import Transient, WaitCode, describe_exception
from hub_service.queue.heartbeat import Heartbeat
from hub_service.queue.models import Job
from hub_service.settings import HubSettings
from openenv.manifest import env_port

__all__ = ["JobRunner"]

log = logging.getLogger("hub_service.pipeline")


class JobRunner:
    """Runs claimed jobs for one worker."""

    def __init__(self, settings: HubSettings, factory: sessionmaker[Session], worker_id: str) -> None:
        self.settings = settings
        self.factory = factory
        self.worker_id = worker_id

    def run(self, claim: jobs.Claim) -> str:
        """Run the job to its end; returns "passed", "failed", "waiting" (for the infrastructure),
        "cancelled" or "lost"."""
        beat = Heartbeat(self.factory, claim.job_id, self.worker_id, self.settings.heartbeat_s)
        beat.start()
        self._beat = beat
        workdir = self.settings.data_dir / "work" / f"job-{claim.job_id}-{claim.attempt}"
        try:
            return self._run(claim, workdir)
        except _Lost:
            return self._lost(claim)
        finally:
            beat.stop_event.set()
            shutil.rmtree(workdir, ignore_errors=True)

    # -- orchestration ------------------------------------------------------------------------------

    def _run(self, claim: jobs.Claim, workdir: Path) -> str:
        """The job's path, top to bottom: fetch → validate → build → smoke → publish, each a recorded
        stage (`_stage`); what each found is written after it; every outcome is handled here."""
        info = self._begin(claim)
        if info is None:
            jobs.finish(self.factory, claim.job_id, self.worker_id, ok=False, error="its version no longer exists")
            return "failed"
        owner, name, sha, trusted = info["owner"], info["name"], info["sha"], info["trusted"]
        try:
            folder = self._stage(claim, StageName.FETCH, lambda lg, ab: self._fetch(info, workdir, lg))
            validated = self._stage(
                claim,
                StageName.VALIDATE,
                lambda lg, ab: self._gate_static(
                    folder, stages.validate(folder, f"{owner}/{name}", lg, run_code=trusted)
                ),
            )
            self._validated(claim, folder, validated)
            built = self._stage(
                claim,
                StageName.BUILD,
                lambda lg, ab: stages.build(self.settings, folder, owner, name, sha, trusted, lg),
            )
            self._built(claim, built)
            smoke = self._stage(
                claim,
                StageName.SMOKE,
                lambda lg, ab: self._gate_smoke(
                    folder, validated, stages.smoke(self.settings, built, folder, lg, ab, validated=validated)
                ),
            )
            self._smoked(claim, validated.report, smoke)
            # registry push: hub_service/pipeline/publish.py (before the verdict; a registry in trouble: Transient)
            self._stage(
                claim,
                StageName.PUBLISH,
                lambda lg, ab: self._publish(
                    claim,
                    lg,
                    publish.push_tested_image(
                        self.settings, built, owner, name, sha, lg, recorded_digest=info["image_digest"]
                    ),
                ),
                deadline=False,
            )
        except Transient as exc:  # the infrastructure failed: the version waits, the job comes back
            return self._wait(claim, exc)
        except _Failed as exc:  # the env failed a stage: the version fails with why
            self._fail_version(claim, exc.stage, exc.reason, extra=exc.extra)
            jobs.finish(self.factory, claim.job_id, self.worker_id, ok=False, error=f"{exc.stage}: {exc.reason}")
            return "failed"
        jobs.finish(self.factory, claim.job_id, self.worker_id, ok=True)
        return "passed"

    # -- what each stage found, written down -----------------------------------------------------

    def _begin(self, claim: jobs.Claim) -> dict[str, Any] | None:
        """What the stages need of the env and its revision (None: the version is gone); a new
        attempt starts with no failure of the last one."""
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            env = session.get(EnvRecord, version.env_id) if version is not None else None
            if version is None or env is None:
                return None
            version.failure_stage = version.failure_reason = None
            return {
                "owner": env.owner,
                "name": env.name,
                "sha": version.sha,
                "source": env.source,
                "trusted": env.trusted,
                "ref": version.ref,
                "image_digest": version.image_digest,  # published before: a version's digest never changes
            }

    def _validated(self, claim: jobs.Claim, folder: Path, validated: stages.Validated) -> None:
        report = validated.report
        self._update(
            claim.version_id,
            validation=report,
            rfc008=validated.rfc008,
            validation_status=report.get("status"),
            manifest=report.get("manifest"),
            readme=_readme(folder),
            discovery=read_discovery(folder),
            port=env_port(folder),
        )
        self._event(claim, "validated", f"validation {report.get('status')}", counts=report.get("summary"))

    def _built(self, claim: jobs.Claim, built: stages.BuildOutput) -> None:
        self._update(
            claim.version_id,
            build_status="passed",
            builder=built.builder,
            image_ref=built.image_ref,
            build_seconds=round(built.seconds, 2),
        )
        self._event(claim, "built", f"built with {built.builder} in {built.seconds:.1f}s", image=built.image_ref)

    # -- RFC 008's verdict, where the setting rfc008_gate lets it decide (hub_service/pipeline/rfc008.py) ----

    def _gate_static(self, folder: Path, validated: stages.Validated) -> stages.Validated:
        from hub_service.pipeline.rfc008 import gate_failure

        why = gate_failure(validated.rfc008, stages.read_folder_declared(folder).present, self.settings.rfc008_gate)
        if why is not None:
            raise stages.ValidationFailed(why, validated.report, validated.rfc008)
        return validated

    def _gate_smoke(self, folder: Path, validated: stages.Validated, smoke: stages.SmokeOutput) -> stages.SmokeOutput:
        from hub_service.pipeline.rfc008 import gate_failure

        why = gate_failure(smoke.rfc008, stages.read_folder_declared(folder).present, self.settings.rfc008_gate)
        if why is not None:  # what the stage measured is kept: the report says which checks failed
            raise stages.ChecksFailed(why, _smoke_fields(validated.report, smoke))
        return smoke

    def _smoked(self, claim: jobs.Claim, report: dict[str, Any], smoke: stages.SmokeOutput) -> None:
        fields = _smoke_fields(report, smoke)
        self._update(claim.version_id, smoke_status="passed", **fields)
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

    # -- running a stage -------------------------------------------------------------------------

    def _stage(self, claim: jobs.Claim, name: str, fn: Any, *, deadline: bool = True) -> Any:
        """Run `fn(log, abort)` as stage `name`, recorded; within its deadline unless `deadline` is False
        (publish: a few database writes, which must not be abandoned half-way)."""
        if self._beat.lost:  # cancelled (a closed pull request) or reclaimed: stop before the next stage
            raise _Lost()
        stage_log = stages.StageLog()
        with session_scope(self.factory) as session:
            run = StageRun(
                job_id=claim.job_id,
                version_id=claim.version_id,
                attempt=claim.attempt,
                stage=name,
                status=StageStatus.RUNNING,
            )
            session.add(run)
            session.flush()
            run_id = run.id
        status, result, failure = StageStatus.PASSED, None, None
        start = time.monotonic()
        try:
            result = (
                within(self.settings, name, fn, stage_log, job_id=claim.job_id)
                if deadline
                else fn(stage_log, stages.Abort())
            )
        except stages.ValidationFailed as exc:
            status, failure = (
                StageStatus.FAILED,
                _Failed(
                    name,
                    exc.reason,
                    {
                        "validation": exc.report,
                        "validation_status": exc.report.get("status"),
                        "manifest": exc.report.get("manifest"),
                        "rfc008": exc.rfc008,
                    },
                ),
            )
        except stages.ChecksFailed as exc:
            status, failure = StageStatus.FAILED, _Failed(name, exc.reason, exc.kept)
        except stages.StageFailed as exc:
            status, failure = StageStatus.FAILED, _Failed(name, exc.reason)
        except Transient as exc:
            exc.stage = exc.stage or name
            stage_log(
                f"not the env's failure: the infrastructure failed ({exc.code}); the revision waits for it and runs again: {exc}"
            )
            status = StageStatus.FAILED
            self._close_stage(run_id, status, stage_log, start)
            raise
        except FetchRefused as exc:
            status, failure = StageStatus.FAILED, _Failed(name, str(exc))
        except SourceError as exc:
            stage_log(f"not the env's failure: its source failed; the revision waits for it and runs again: {exc}")
            self._close_stage(run_id, StageStatus.FAILED, stage_log, start)
            transient = Transient(str(exc), code=WaitCode.SOURCE)
            transient.stage = name
            raise transient from exc
        except Exception as exc:  # a bug of ours, or a library's: fail the version with the error, keep the log
            log.exception("stage %s of job %s crashed", name, claim.job_id)
            status, failure = StageStatus.FAILED, _Failed(name, f"internal error: {describe_exception(exc)}")
        if failure is not None:
            stage_log(f"FAILED: {failure.reason}")
        self._close_stage(run_id, status, stage_log, start)
        if failure is not None:
            raise failure
        return result

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

    def _publish(self, claim: jobs.Claim, lg: stages.StageLog, published: publish.Published | None = None) -> None:
        from hub_service.pipeline.rfc008 import with_hub_results

        with session_scope(self.factory) as session:
            version = session.get_one(EnvVersion, claim.version_id)
            env = session.get_one(EnvRecord, version.env_id)
            if published is not None:
                if published.pushed is not None:
                    version.registry_ref, version.image_digest = published.pushed.registry_ref, published.pushed.digest
                    version.signature = published.signature
                if version.rfc008 is not None:
                    try:
                        version.rfc008 = with_hub_results(version.rfc008, published.results)
                    except ValueError as exc:  # a report kept by an older Hub: it stays as it was
                        lg(f"the RFC 008 report was not updated with the publish checks: {exc}")
                for result in published.results:
                    lg(f"RFC 008 {result.check_id}: {result.status}: {(result.evidence or [''])[0]}")
            if version.state == VersionState.CANCELLED:  # the pull request closed before the heartbeat told us
                lg(f"{version.sha[:12]} was cancelled; nothing to publish")
                return
            lifecycle.move(session, env, version, VersionState.PASSED, cause=_cause(claim))
            baseline = (version.reward_check or {}).get("baseline_returns")
            if baseline and not session.scalar(
                select(Eval.id).where(Eval.version_id == version.id, Eval.source == "baseline")
            ):
                row = record_eval(session, env, version, source="baseline", model="random", returns=baseline)
                lg(f"random baseline: mean return {row.mean_return:.3f} over {row.episodes} episodes")
            if env.sha == version.sha and version.ref == "main":
                lg(f"{env.repo_id} is passing at {version.sha[:12]}")
            else:
                lg(f"{version.sha[:12]} passed ({version.ref}); the env's current revision is {str(env.sha)[:12]}")

    def _wait(self, claim: jobs.Claim, exc: Transient) -> str:
        """The infrastructure failed this run: the version waits for it, and the job comes back
        after a backoff (sooner when the engine answers again; see `jobs.wake_waiting`)."""
        reason = str(exc)[:4000]
        waited = jobs.wait_for_infrastructure(
            self.factory,
            claim.job_id,
            self.worker_id,
            reason,
            first_s=self.settings.infra_retry_s,
            max_s=self.settings.infra_retry_max_s,
            max_waits=self.settings.infra_wait_max_count,
            max_wait_s=self.settings.infra_wait_max_s,
            counted=exc.code != WaitCode.HOST_SETUP,
        )
        if waited is None:
            return "lost"
        if waited.gave_up is not None:  # a cap was reached: the wait ends, with what the last one was about
            self._fail_version(
                claim, exc.stage or "worker", f"{waited.gave_up}; the last ({exc.code}): {reason}", code=exc.code
            )
            return "failed"
        delay = waited.delay or 0.0
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            if version is None or version.state == VersionState.CANCELLED:
                return "waiting"
            env = session.get_one(EnvRecord, version.env_id)
            lifecycle.move(
                session,
                env,
                version,
                VersionState.WAITING,
                cause=_cause(claim),
                waiting_code=exc.code,
                waiting_reason=reason,
            )
        log.warning(
            "job %s waits for the infrastructure (%s), retried in %.0fs: %s", claim.job_id, exc.code, delay, reason
        )
        return "waiting"

    def _update(self, version_id: int | None, **values: Any) -> None:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, version_id)
            for key, value in values.items():
                setattr(version, key, value)

    def _fail_version(
        self,
        claim: jobs.Claim,
        stage: str,
        reason: str,
        extra: dict[str, Any] | None = None,
        code: str | None = None,
    ) -> None:
        fields: dict[str, str] = {StageName.BUILD: "build_status", StageName.SMOKE: "smoke_status"}
        status_field = fields.get(stage)
        with session_scope(self.factory) as session:
            version = session.get_one(EnvVersion, claim.version_id)
            env = session.get_one(EnvRecord, version.env_id)
            if version.state == VersionState.CANCELLED:  # the pull request closed while this stage ran
                return
            for key, value in (extra or {}).items():
                setattr(version, key, value)
            if status_field:
                setattr(version, status_field, "failed")
            lifecycle.move(
                session,
                env,
                version,
                VersionState.FAILED,
                cause=_cause(claim),
                failure_stage=stage,
                failure_reason=reason,
                failure_code=code,
            )
        log.info("job %s failed at %s: %s", claim.job_id, stage, reason)

    def _event(self, claim: jobs.Claim, kind: str, summary: str, **details: Any) -> None:
        with session_scope(self.factory) as session:
            version = session.get(EnvVersion, claim.version_id)
            if version is not None:  # a stage passed (validated, built, smoke_tested): one audit event
                record(session, version.env_id, kind, summary, cause=_cause(claim), version=version, **details)

    def _lost(self, claim: jobs.Claim) -> str:
        """The job stopped being ours mid-run: cancelled (its version says so), or reclaimed."""
        with session_scope(self.factory) as session:
            job = session.get(Job, claim.job_id)
            if job is None or job.state != "cancelled":
                log.warning("job %s was taken from worker %s; stopping", claim.job_id, self.worker_id)
                return "lost"
            version = session.get(EnvVersion, claim.version_id)
            if version is not None and version.state not in lifecycle.FINISHED:
                env = session.get_one(EnvRecord, version.env_id)
                cause = f"{_cause(claim)}: {job.error or 'cancelled'}"
                lifecycle.move(session, env, version, VersionState.CANCELLED, cause=cause)
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


def _smoke_fields(report: dict[str, Any], smoke: stages.SmokeOutput) -> dict[str, Any]:
    """What the smoke stage measured of a revision, as its columns (the validate stage's report
    with the runtime checks merged in)."""
    merged = _merge_reports(report, smoke.runtime_report)
    return {
        "cold_start_s": smoke.cold_start_s,
        "step_p50_ms": smoke.step_p50_ms,
        "step_p95_ms": smoke.step_p95_ms,
        "capacity": smoke.capacity,
        "determinism": smoke.determinism,
        "reward_check": smoke.reward_check,
        "validation": merged,
        "validation_status": merged.get("status"),
        **({"rfc008": smoke.rfc008} if smoke.rfc008 is not None else {}),
    }


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
