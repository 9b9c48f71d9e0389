"""The pipeline's stages, free of database code: fetch → validate → build → smoke.

Each stage takes a `StageLog` to write to and returns what the next needs; a failure the env is
responsible for raises `StageFailed(reason)`; one of the infrastructure (no container engine, the
engine restarted, a base image or the source unreachable) raises `Transient(reason, code)`, and
the version waits for the infrastructure and is retried (never blamed on the env).

A stage can be stopped from outside (the runner's deadline, see `Abort`), and every read from an
env server is capped in size and time: what a hostile server sends never grows this worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_service.catalog.states import BuilderKind
from hub_service.pipeline.builders import BuildOutput, choose_builder, engine_available, image_tag
from hub_service.pipeline.stage_kit import Abort, ChecksFailed, StageFailed, StageLog, ValidationFailed, plain
from hub_service.queue.errors import Transient
from hub_service.settings import HubSettings

__all__ = [
    "Abort",
    "BuildOutput",
    "ChecksFailed",
    "SmokeOutput",
    "StageFailed",
    "StageLog",
    "Transient",
    "Validated",
    "ValidationFailed",
    "build",
    "engine_available",
    "image_tag",
    "plain",
    "read_folder_declared",
    "smoke",
    "validate",
]

# -- validate ------------------------------------------------------------------------------------


@dataclass
class Validated:
    repo_id: str
    report: dict[str, Any]  # this SDK's report (`openenv validate --legacy-report`)
    rfc008: dict[str, Any] | None  # the RFC 008 report's static level (hub_service/pipeline/rfc008.py)


def validate(folder: Path, repo_id: str, log: StageLog, *, run_code: bool) -> Validated:
    """Static checks of the fetched files (`openenv validate`'s report), and the static level of
    RFC 008 from them.

    Args:
        run_code: whether the checks may import the env's code on this machine (trusted sources
            only; untrusted code is imported only inside its container, in the smoke stage).

    Raises:
        StageFailed: the report's status is fail or unsupported.
    """
    from openenv.validation import validate_folder

    report = validate_folder(folder, **_validate_options(run_code, repo_id))
    for result in report.checks:
        log(f"{result.status:4s} {result.id}: {result.message}")
    log(f"status: {report.status}")
    data = report.model_dump(mode="json")
    rfc008 = _rfc008_static(folder, data, repo_id, run_code, log)
    if report.status in ("fail", "unsupported", "error"):
        problems = [c for c in report.problems() if c.status == "fail"] or report.problems()
        reason = (
            "; ".join(f"{c.id}: {c.message}" for c in problems[:3])
            or report.unsupported_reason
            or report.error
            or report.status
        )
        raise ValidationFailed(f"validation {report.status}: {reason}", data, rfc008)
    return Validated(repo_id, data, rfc008)


def _rfc008_static(
    folder: Path, legacy: dict[str, Any], repo_id: str, run_code: bool, log: StageLog
) -> dict[str, Any] | None:
    from hub_service.pipeline.rfc008 import static_report

    if not (folder / "openenv.yaml").is_file():
        return None  # not a package: there is no RFC 008 report to make
    try:
        report = static_report(folder, legacy, repo_id, run_code=run_code)
    except Exception as exc:  # the report is kept beside the Hub's verdict, never in its way
        log(f"RFC 008 report could not be made: {type(exc).__name__}: {exc}")
        return None
    log(f"RFC 008 (policy {report['policy_version']}, static level): {report['verdict']}")
    for r in report["results"]:
        if r["status"] != "pass":
            log(f"  {r['status']:5s} {r['check_id']}: {(r['evidence'] or [''])[0]}")
    return report


def _validate_options(run_code: bool, repo_id: str) -> dict[str, Any]:
    import inspect

    from openenv.validation import validate_folder

    params = inspect.signature(validate_folder).parameters
    options: dict[str, Any] = {}
    if "import_app" in params:
        options["import_app"] = run_code
    if "space_id" in params:
        options["space_id"] = repo_id
    return options


# -- build ---------------------------------------------------------------------------------------


def build(
    settings: HubSettings, folder: Path, owner: str, name: str, sha: str, trusted: bool, log: StageLog
) -> BuildOutput:
    """Build the env with the builder `choose_builder` picks: an image with the container engine, or a
    cached virtual environment (hub_service/pipeline/builders.py).

    Raises:
        StageFailed: the Dockerfile or the dependencies do not build.
        Transient: no container engine answered, it restarted, or a base image cannot be pulled.
    """
    return choose_builder(settings, trusted).build(settings, folder, owner, name, sha, log)


# -- smoke ---------------------------------------------------------------------------------------


@dataclass
class SmokeOutput:
    cold_start_s: float
    step_p50_ms: float
    step_p95_ms: float
    steps: int
    runtime_report: dict[str, Any] | None = None
    server_log: str = ""
    errors: list[str] = field(default_factory=list)
    rejected: int = 0  # actions the env refused with EXECUTION_ERROR while its session lived on
    first_rejection: str | None = None
    rewards_outside_range: list[float] = field(default_factory=list)  # against openenv.yaml's validation.reward.range
    # The trust checks (hub_service/pipeline/trust.py); see EnvVersion for their shape.
    capacity: dict[str, Any] | None = None
    determinism: dict[str, Any] | None = None
    reward_check: dict[str, Any] | None = None
    rfc008: dict[str, Any] | None = None  # every level of RFC 008, in the hub lane


def smoke(
    settings: HubSettings,
    built: BuildOutput,
    folder: Path,
    log: StageLog,
    abort: Abort | None = None,
    *,
    validated: Validated | None = None,
) -> SmokeOutput:
    """Start the built env, drive it like a client would, time it, stop it.

    Start → /health → /schema → reset → N steps with actions generated from the action schema →
    state → close, with a time limit on every call; then the runtime checks of `openenv validate
    --url`. Records the cold start (start → first reset reply) and step latency.

    `abort` (fired by the runner at the stage's deadline) cancels the test and stops the server.
    With `validated` (the validate stage's output), the RFC 008 report of every level is made
    against the running server too (`SmokeOutput.rfc008`).

    Raises:
        StageFailed: the server does not start, answers wrongly, crashes or hangs.
        Transient: the container engine stopped answering or restarted meanwhile (not the env's doing).
    """
    abort = abort or Abort()
    if built.builder != BuilderKind.CONTAINER:
        return asyncio.run(_abortable(_smoke(settings, built, folder, log, abort, validated), abort))
    from openenv.client.providers._docker import docker_client
    from openenv.engines import engine
    from openenv.errors import ProviderUnavailableError
    from openenv.images import engine_epoch

    try:
        client = docker_client()
        epoch = engine_epoch(client)
    except Exception as exc:  # no engine to run the container on
        raise Transient(
            f"no container engine answers ({exc}); the smoke test waits for one", code=Transient.NO_ENGINE
        ) from exc
    try:
        engine().runtime_options(client.api, settings.sandbox_runtime)
        if settings.smoke_isolated_network:
            engine().check_isolation()
    except ProviderUnavailableError as exc:  # the host's set-up, not the env: wait until it is fixed
        raise Transient(f"{exc}; the smoke test waits for it", code=Transient.HOST_SETUP) from exc
    try:
        return asyncio.run(_abortable(_smoke(settings, built, folder, log, abort, validated), abort))
    except StageFailed as exc:
        trouble = _engine_trouble(epoch)
        if trouble is not None:
            log(f"not the env's failure: {trouble}")
            raise trouble from exc
        raise


async def _abortable(coro: Any, abort: Abort) -> Any:
    """Run `coro` as a task that `abort` cancels from any thread (its `finally` blocks stop the server)."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()

    def cancel() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has finished: nothing left to cancel
            loop.call_soon_threadsafe(task.cancel)  # type: ignore[union-attr]

    abort.on_abort(cancel)
    return await coro


def _engine_trouble(epoch: str | None) -> Transient | None:
    """Why a failed smoke test is the engine's doing (gone, or restarted since `epoch`), or None."""
    from openenv.images._engine_trouble import engine_change

    change = engine_change(None, epoch=epoch)
    if change is None:
        return None
    return Transient(f"the container engine {change} during the smoke test", code=Transient.ENGINE_LOST)


def read_folder_declared(folder: Path) -> Any:
    """What the env declares in openenv.yaml's `validation:` block (`openenv.declared.Declared`)."""
    from openenv._yaml import load_limited
    from openenv.declared import read_declared

    try:
        data = load_limited((folder / "openenv.yaml").read_text(encoding="utf-8", errors="replace"))
    except Exception:  # no readable manifest: validation has said so already; nothing is declared
        data = None
    return read_declared(data if isinstance(data, dict) else None)


def _provider(settings: HubSettings, built: BuildOutput, folder: Path, *, read_only: bool = True) -> Any:
    from openenv.client.providers import ProcessProvider

    timeout = settings.smoke_timeout_s
    if built.builder == BuilderKind.CONTAINER:
        from hub_service.sandbox import confined_provider, grant
        from openenv.manifest import env_port

        overrides, _ = grant(settings, read_folder_declared(folder))
        return confined_provider(
            settings,
            str(built.image_ref),
            startup_timeout_s=timeout,
            read_only=read_only,
            labels={"org.openenv.hub.smoke": "1"},
            port=env_port(folder),
            overrides=overrides,
        )
    return ProcessProvider(folder, startup_timeout_s=timeout)


async def _start(
    settings: HubSettings, built: BuildOutput, folder: Path, log: StageLog, abort: Abort
) -> tuple[Any, str, float]:
    """Start the server confined; an env that needs to write outside /tmp gets one more try
    without the read-only root. Returns the provider, its URL and when the start began."""
    from openenv.errors import OpenEnvError

    read_only = built.builder == BuilderKind.CONTAINER
    while True:
        provider = _provider(settings, built, folder, read_only=read_only)
        abort.on_abort(provider.stop)  # the container goes with an aborted stage, even if this loop is stuck
        start = time.monotonic()
        try:
            url = await provider.astart()
        except OpenEnvError as exc:
            if read_only and _wrote_on_read_only_root(exc):
                log("the server wrote outside /tmp on a read-only root; trying again with a writable root")
                await provider.astop()
                read_only = False
                continue
            try:
                server_log = await asyncio.to_thread(provider.logs)
            except Exception:  # nothing to show
                server_log = ""
            for line in server_log.splitlines()[-100:]:
                log(f"server| {line}")
            await provider.astop()
            raise StageFailed(f"the server did not start: {exc}") from exc
        if built.builder == BuilderKind.CONTAINER:
            for line in provider.engine.unenforced():  # guarantees the engine's place keeps from the Hub
                log(f"not enforced: {line}")
            await _check_runtime(settings, provider, log)
        return provider, url, start


async def _check_runtime(settings: HubSettings, provider: Any, log: StageLog) -> None:
    """Log the runtime the container really runs under (checked on the host); a container meant for
    gVisor that runs on the host's kernel, or that the Hub cannot see, is stopped and the test waits:
    the host's set-up (`hub_service.sandbox.verify_runtime`).

    Raises:
        Transient: the host could not show the container runs under the Hub's sandbox runtime.
    """
    from hub_service.sandbox import RuntimeUnverified, verify_runtime

    try:
        await asyncio.to_thread(verify_runtime, settings, provider, log)
    except RuntimeUnverified as exc:
        raise Transient(f"{exc}; the smoke test waits", code=Transient.HOST_SETUP) from exc


def _wrote_on_read_only_root(exc: Exception) -> bool:
    """Whether the server stopped because it wrote on the container's read-only root. The words
    are the kernel's (EROFS, as the env's own Python prints it), in the server's output: text from
    outside the Hub, and this is the one place that reads it."""
    return "Read-only file system" in str(exc)


async def _smoke(
    settings: HubSettings,
    built: BuildOutput,
    folder: Path,
    log: StageLog,
    abort: Abort,
    validated: Validated | None = None,
) -> SmokeOutput:
    from openenv import GenericEnvClient
    from openenv.validation.paths import play_paths

    declared = read_folder_declared(folder)
    if built.builder == BuilderKind.CONTAINER:
        from hub_service.sandbox import grant

        for note in grant(settings, declared)[1]:
            log(note)
    provider, url, start = await _start(settings, built, folder, log, abort)
    log_shown = False
    errors: list[str] = []
    try:
        log(f"server up at {url} after {time.monotonic() - start:.2f}s")
        schema = await _get_json(url + "/schema", settings.step_timeout_s, settings.smoke_reply_max_mb)
        action_schema = schema.get("action") if isinstance(schema, dict) else None
        if not isinstance(action_schema, dict):
            raise StageFailed("GET /schema did not return an action schema")
        client = GenericEnvClient(
            url,
            message_timeout_s=settings.step_timeout_s,
            connect_timeout_s=settings.step_timeout_s,
            max_message_size_mb=settings.smoke_message_max_mb,
        )
        try:
            # The episode and its verdict: the one rule `openenv validate --url` applies too (docs/validate.md).
            begun = time.monotonic()
            # An MCP env is played on its users' MCP session path too, which then decides (openenv/validation/paths.py).
            episode = await play_paths(
                client, action_schema, settings.smoke_steps, seed=0, on_record=lambda r: log(_step_line(r)), on_note=log
            )
            reset = episode.records[0]
            if reset.outcome != "ok":
                raise StageFailed(_capped(f"reset failed: {reset.got}", episode))
            cold_start = begun - start + reset.ms / 1000  # the start, then the first reset's round trip
            log(f"first reset reply after {cold_start:.2f}s (cold start)")
            if not episode.verdict.ok:
                raise StageFailed(_capped(f"{episode.verdict.reason} ({episode.verdict.code})", episode))
            latencies, rewards = episode.latencies_ms, episode.rewards
            rejected = [r.got for r in episode.steps() if r.outcome == "refused"]
            if rejected:
                log(
                    f"{len(rejected)} of {len(episode.steps())} actions were rejected by the env and its session lived on; the first: {_short(rejected[0])}"
                )
            outside = declared.reward_outside(rewards)
            if outside and declared.reward is not None:
                log(
                    f"warning: rewards {outside[:5]} are outside the declared range {list(declared.reward.range)} (openenv.yaml validation.reward)"
                )
        finally:
            await client.close()
        runtime_report = await _runtime_checks(url, log, errors)
        figures = {
            "cold_start_s": round(cold_start, 3),
            "step_p50_ms": round(statistics.median(latencies), 3),
            "step_p95_ms": round(_p95(latencies), 3),
        }
        from hub_service.pipeline.trust import TrustContext
        from hub_service.pipeline.trust_checks import run_checks

        # The server's log as the smoke test left it, before the trust checks' hundreds of sessions
        # would push its start-up and the smoke run's lines out of the tail the stage log keeps.
        await _show_server_log(provider, log)
        log_shown = True
        trust = await run_checks(
            TrustContext(
                settings, url, provider, action_schema, declared, built.image_ref, dict(figures), log, episode.path
            )
        )
        rfc008 = (
            await _rfc008_all(
                settings,
                folder,
                url,
                cold_start,
                validated,
                runtime_report,
                action_schema,
                log,
                provider=provider,
                built=built,
            )
            if validated
            else None
        )
        return SmokeOutput(
            cold_start_s=figures["cold_start_s"],
            step_p50_ms=figures["step_p50_ms"],
            step_p95_ms=figures["step_p95_ms"],
            steps=len(latencies),
            runtime_report=runtime_report,
            errors=errors,
            rejected=len(rejected),
            first_rejection=rejected[0][:500] if rejected else None,
            rewards_outside_range=outside[:20],
            capacity=trust["capacity"],
            determinism=trust["determinism"],
            reward_check=trust["reward_check"],
            rfc008=rfc008,
        )
    except StageFailed:
        raise
    except Exception as exc:
        raise StageFailed(f"smoke test error: {type(exc).__name__}: {exc}") from exc
    finally:
        if not log_shown:
            await _show_server_log(provider, log)
        await provider.astop()


async def _rfc008_all(
    settings: HubSettings,
    folder: Path,
    url: str,
    first_work_s: float,
    validated: Validated,
    runtime_report: dict[str, Any] | None,
    action_schema: dict[str, Any],
    log: StageLog,
    *,
    provider: Any = None,
    built: BuildOutput | None = None,
) -> dict[str, Any] | None:
    """The RFC 008 report of every level, checked against the running server (`url`); a
    container `provider`'s container is measured too."""
    from hub_service.pipeline.rfc008 import build_results, hub_report, with_hub_results
    from hub_service.pipeline.rfc008_container import ContainerMeasures
    from hub_service.pipeline.rfc008_cross_host import CHECKS as CROSS_HOST
    from openenv.engines.runtimes import GVISOR

    if validated.rfc008 is None:
        return None  # not a package the RFC reads (see the validate stage's log)
    try:
        container = (
            await asyncio.to_thread(ContainerMeasures.of, settings, provider, gvisor=settings.sandbox_runtime == GVISOR)
            if getattr(provider, "container_id", None)
            else None
        )
        report = await asyncio.to_thread(
            hub_report,
            folder,
            validated.report,
            runtime_report,
            validated.repo_id,
            url,
            first_work_s=first_work_s,
            settings=settings,
            action_schema=action_schema,
            container=container,
        )
        present = {r["check_id"] for r in report["results"]}
        measured = build_results(built) if built is not None else []
        if container is not None and present & set(CROSS_HOST):
            measured += await asyncio.to_thread(_cross_host, settings, provider, folder, url, report)
        report = with_hub_results(report, [r for r in measured if r.check_id in present])
    except Exception as exc:  # the report is kept beside the smoke verdict, never in its way
        log(f"RFC 008 report could not be made: {type(exc).__name__}: {exc}")
        return None
    counts = {s: sum(1 for r in report["results"] if r["status"] == s) for s in ("pass", "fail", "skip", "error")}
    log(
        f"RFC 008 (policy {report['policy_version']}, hub lane, levels {report['levels_run']}): {report['verdict']}, {counts}"
    )
    for r in report["results"]:
        if r["status"] in ("fail", "error"):
            log(f"  {r['status']:5s} {r['check_id']}: {(r['evidence'] or [''])[0]}")
    return report


def _cross_host(settings: HubSettings, provider: Any, folder: Path, url: str, report: dict[str, Any]) -> Any:
    """hub.cross_host_determinism and semantic.verifier_portability of the revision whose smoke
    container `provider` runs."""
    from hub_service.pipeline.rfc008_cross_host import Revision, cross_host_results
    from hub_service.sandbox import grant
    from openenv.validation.rfc008 import ValidationReportV2

    declared = read_folder_declared(folder)
    revision = Revision(
        image=provider.image,
        port=provider.port,
        overrides=grant(settings, declared)[0],
        folder=folder,
        url=url,
        manifest=ValidationReportV2.model_validate(report).manifest,
        declared=declared,
    )
    return cross_host_results(settings, revision)


async def _show_server_log(provider: Any, log: StageLog) -> None:
    """The last 200 lines of the server's log, into the stage log."""
    try:
        server_log = await asyncio.to_thread(provider.logs)
    except Exception as exc:  # nothing started, or already gone: say so in the log
        server_log = f"(no server log: {exc})"
    for line in (server_log or "").splitlines()[-200:]:
        log(f"server| {line}")


async def _runtime_checks(url: str, log: StageLog, errors: list[str]) -> dict[str, Any] | None:
    from openenv.validation import validate_url_async

    try:
        report = await validate_url_async(url)
    except Exception as exc:  # the checks are extra information; the smoke verdict stands on its own
        log(f"runtime checks could not run: {exc}")
        errors.append(str(exc))
        return None
    for result in report.checks:
        log(f"{result.status:4s} {result.id}: {result.message}")
    if report.status in ("fail", "error"):
        failed = [c for c in report.checks if c.status == "fail"]
        raise StageFailed("runtime checks failed: " + "; ".join(f"{c.id}: {c.message}" for c in failed[:3]))
    return report.model_dump(mode="json")


def _capped(text: str, episode: Any) -> str:
    """A smoke failure where a reply was over the Hub's cap names the setting that sets it."""
    if any(r.code == "MESSAGE_TOO_BIG" for r in episode.records):
        return f"{text} (the Hub's cap for a reply: OPENENV_HUB_SMOKE_MESSAGE_MAX_MB)"
    return text


class _TooLarge(Exception):
    pass


async def _get_json(url: str, timeout: float, max_mb: float) -> Any:
    """GET `url` as JSON: at most `max_mb` MB, within `timeout` seconds in all (`read_within`)."""
    import json
    import urllib.request

    from openenv._http import read_within

    limit = int(max_mb * (1 << 20))
    path = "/" + url.rsplit("/", 1)[-1]
    late = f"the reply did not finish within {timeout:g}s (OPENENV_HUB_STEP_TIMEOUT_S)"

    def fetch() -> Any:
        ends = time.monotonic() + timeout
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = read_within(reply, limit, ends, late)
        if body is None:
            raise _TooLarge()
        return json.loads(body)

    try:
        return await asyncio.to_thread(fetch)
    except _TooLarge:
        raise StageFailed(
            f"GET {path} returned more than {max_mb:g} MB, the Hub's cap for a reply from an env server "
            f"(OPENENV_HUB_SMOKE_REPLY_MAX_MB); keep it small"
        ) from None
    except Exception as exc:
        raise StageFailed(f"GET {path} failed: {exc}") from exc


def _step_line(r: Any) -> str:
    """One line of the stage log per request of the episode: what was sent and what came back."""
    if r.request != "step":
        return f"{r.request}: {r.outcome}{f' {r.code}' if r.code else ''} → {r.got} ({r.ms:.1f} ms)"
    if r.outcome == "refused":
        return f"step {r.index}: sent {r.sent} → rejected by the env ({r.code}): {r.got}"
    return f"step {r.index}: sent {r.sent} → {r.outcome}{f' {r.code}' if r.code else ''}: {r.got} ({r.ms:.1f} ms)"


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0.0


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
