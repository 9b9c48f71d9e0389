"""The pipeline's stages, free of database code: fetch → validate → build → smoke.

Each stage takes a `StageLog` to write to and returns what the next needs; a failure the env is
responsible for raises `StageFailed(reason)`; one of the infrastructure (no Docker engine, the
engine restarted, a base image or the source unreachable) raises `Transient(reason, code)`, and
the version waits for the infrastructure and is retried (never blamed on the env).

A stage can be stopped from outside (the runner's deadline, see `Abort`), and every read from an
env server is capped in size and time: what a hostile server sends never grows this worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import statistics
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_service.settings import HubSettings

__all__ = [
    "Abort",
    "BuildOutput",
    "SmokeOutput",
    "StageFailed",
    "StageLog",
    "Transient",
    "ValidationFailed",
    "build",
    "smoke",
    "validate",
]

_MAX_LOG = 400_000  # characters kept per stage log (the first lines and the tail win)
_MAX_LINE = 1_000  # characters kept per line: the 200 server lines a smoke log takes fit, with room to spare
_KEEP_HEAD = 20  # lines at the start of a log (the Hub's own: what is built, from what) that are never dropped
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    """Text without terminal colour codes (build tools colour their errors)."""
    return _ANSI.sub("", text)


class StageFailed(Exception):
    """The environment failed this stage; `reason` is what users see."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ValidationFailed(StageFailed):
    """Validation failed; `report` is the report, kept even though the stage failed."""

    def __init__(self, reason: str, report: dict[str, Any]) -> None:
        super().__init__(reason)
        self.report = report


class Transient(Exception):
    """Something outside the environment failed; the job should be retried.

    `code` says what: NO_ENGINE, ENGINE_LOST, BASE_IMAGE, NETWORK (the values of ImageBuildError's
    reasons), SOURCE (the source of the env's files), or OTHER.
    """

    NO_ENGINE = "no_engine"
    ENGINE_LOST = "engine_lost"
    BASE_IMAGE = "base_image"
    NETWORK = "network"
    SOURCE = "source"
    OTHER = "other"
    ENGINE = frozenset({NO_ENGINE, ENGINE_LOST})  # what an engine that answers again may have fixed

    def __init__(self, message: str, code: str = OTHER) -> None:
        super().__init__(message)
        self.code = code


class StageLog:
    """Lines of one stage's log, with a time offset, capped in size.

    Each line is cut at `_MAX_LINE` characters (with a marker saying how much was cut), and when
    the log is over `_MAX_LOG` lines are dropped after its first `_KEEP_HEAD`: one huge line or a
    flood of output from a build or a server never pushes out the Hub's own lines.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.dropped = 0
        self.start = time.monotonic()
        self.closed = False

    def __call__(self, line: str) -> None:
        if self.closed:  # a stage stopped at its deadline may still be winding down
            return
        body = plain(line[: _MAX_LINE * 4]).rstrip()  # cut before the regex runs over a line of megabytes
        if len(line) > _MAX_LINE * 4 or len(body) > _MAX_LINE:
            cut = len(line) - _MAX_LINE if len(line) > _MAX_LINE * 4 else len(body) - _MAX_LINE
            body = f"{body[:_MAX_LINE]} [... {cut} more characters cut]"
        text = f"[{time.monotonic() - self.start:7.2f}s] {body}"
        self.lines.append(text)
        self.size += len(text) + 1
        while self.size > _MAX_LOG and len(self.lines) > _KEEP_HEAD + 1:
            self.size -= len(self.lines.pop(_KEEP_HEAD)) + 1
            self.dropped += 1

    def close(self) -> None:
        """Take no more lines (the runner has recorded the log)."""
        self.closed = True

    def text(self) -> str:
        if not self.dropped:
            return "\n".join(self.lines)
        head, tail = self.lines[:_KEEP_HEAD], self.lines[_KEEP_HEAD:]
        return "\n".join(
            [*head, f"[... {self.dropped} lines dropped: the log is capped at {_MAX_LOG} characters ...]", *tail]
        )


class Abort:
    """Stops a running stage from outside (the runner, when the stage's deadline passes): the stage
    registers what must stop with it (its server, its event loop), and `abort` stops all of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []
        self.fired = False

    def on_abort(self, hook: Callable[[], None]) -> None:
        """Call `hook` when the stage is aborted (at once if it already was)."""
        with self._lock:
            if not self.fired:
                self._hooks.append(hook)
                return
        hook()

    def abort(self) -> None:
        """Run every hook, the last registered first; a hook that fails is logged, the rest still run."""
        with self._lock:
            self.fired, hooks, self._hooks = True, self._hooks, []
        for hook in reversed(hooks):
            try:
                hook()
            except Exception:  # stopping is best-effort per hook; the others must still run
                logging.getLogger("hub_service.pipeline").warning(
                    "stopping an aborted stage: %r failed", hook, exc_info=True
                )


# -- validate ------------------------------------------------------------------------------------


def validate(folder: Path, repo_id: str, log: StageLog, *, run_code: bool) -> dict[str, Any]:
    """Static checks of the fetched files (`openenv validate`'s report).

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
    if report.status in ("fail", "unsupported", "error"):
        problems = [c for c in report.problems() if c.status == "fail"] or report.problems()
        reason = (
            "; ".join(f"{c.id}: {c.message}" for c in problems[:3])
            or report.unsupported_reason
            or report.error
            or report.status
        )
        raise ValidationFailed(f"validation {report.status}: {reason}", data)
    return data


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


@dataclass
class BuildOutput:
    builder: str
    image_ref: str | None = None
    python: str | None = None
    seconds: float = 0.0


def image_tag(settings: HubSettings, owner: str, name: str, sha: str) -> str:
    slug = re.sub(r"[^a-z0-9_.-]+", "-", f"{owner}-{name}".lower()).strip("-.")
    return f"{settings.image_prefix}/{slug}:{sha[:12]}"


def choose_builder(settings: HubSettings, trusted: bool) -> str:
    """docker or process; untrusted code never runs outside a container."""
    if settings.builder == "process":
        if not trusted:
            raise StageFailed(
                "this revision is not from a trusted source: it is built and run only in containers, and the Hub's builder is 'process'"
            )
        return "process"
    if settings.builder == "docker" or not trusted:
        return "docker"
    return "docker" if docker_available() else "process"


def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception:  # no SDK, no engine, no permission: all mean "not available here"
        return False
    return True


def build(
    settings: HubSettings, folder: Path, owner: str, name: str, sha: str, trusted: bool, log: StageLog
) -> BuildOutput:
    """Build the env: an image with the Docker engine, or a cached virtual environment.

    Raises:
        StageFailed: the Dockerfile or the dependencies do not build.
        Transient: no Docker engine answered, it restarted, or a base image cannot be pulled.
    """
    builder = choose_builder(settings, trusted)
    start = time.monotonic()
    if builder == "docker":
        from hub_service.pipeline.sandbox import build_options
        from openenv.dockerfile import find_dockerfile
        from openenv.images import ImageBuildError, build_image

        dockerfile = find_dockerfile(folder)
        if dockerfile is None:
            raise StageFailed(
                "no Dockerfile: a Docker Space needs one at its root (upstream's source layout keeps it at server/Dockerfile, "
                "which is built with the env folder as context)"
            )
        tag = image_tag(settings, owner, name, sha)
        rel = dockerfile.relative_to(folder).as_posix()
        log(f"building image {tag} from {rel}")
        try:
            result = build_image(
                folder,
                tag,
                base_image=settings.base_image,
                on_log=log,
                timeout_s=settings.build_timeout_s,
                dockerfile=rel,
                labels={"org.openenv.hub.repo": f"{owner}/{name}", "org.openenv.hub.sha": sha},
                **build_options(settings),  # memory, processes, disk while it runs, network
            )
        except ImageBuildError as exc:
            if exc.infrastructure:
                raise Transient(str(exc), code=exc.reason) from exc
            text = str(exc).replace(str(folder), "<the env folder>")  # no path of this worker in what users see
            summary = (
                exc.reason != ImageBuildError.FAILED or exc.exit_code == 137
            )  # the message says it better than the log
            raise StageFailed(text if summary else _last_error_line(exc.log, text)) from exc
        try:
            size_mb = _image_size_mb(tag)
        except Exception as exc:  # the image was built: an engine that stopped answering is the machine's trouble
            if not docker_available():
                raise Transient(
                    f"the Docker engine stopped answering after the build ({exc})", code=Transient.ENGINE_LOST
                ) from exc
            raise
        log(
            f"built {tag} ({result.image_id[:19]}, {size_mb:.0f} MB) in {result.seconds:.1f}s with {result.builder}, SDK {result.sdk}"
        )
        if size_mb > settings.image_max_mb:
            _remove_image(tag)
            raise StageFailed(
                f"the image is {size_mb:.0f} MB, over the Hub's cap of {settings.image_max_mb} MB; slim the image"
            )
        return BuildOutput(builder="docker", image_ref=tag, seconds=time.monotonic() - start)
    from openenv.client.providers import ProcessProvider

    log("preparing a virtual environment for the env's dependencies")
    try:
        provider = ProcessProvider(folder)
        python = provider.interpreter
    except Exception as exc:
        raise StageFailed(f"installing the dependencies failed: {exc}") from exc
    log(f"interpreter: {python}")
    return BuildOutput(builder="process", python=str(python), seconds=time.monotonic() - start)


def _image_size_mb(tag: str) -> float:
    import docker

    return float(docker.from_env().images.get(tag).attrs.get("Size", 0)) / 2**20


def _remove_image(tag: str) -> None:
    import docker

    try:
        docker.from_env().images.remove(tag, force=True)
    except Exception:  # removal is tidying up; the verdict stands either way
        logging.getLogger("hub_service.pipeline").warning("could not remove oversized image %s", tag, exc_info=True)


# BuildKit's closing lines restate which step failed; the step's own last error line says why.
_RESTATED = re.compile(r"executor failed running|did not complete successfully|failed to solve|^-+$|^\s*>\s*\[", re.I)
_STEP_PREFIX = re.compile(r"^#\d+\s+(\d+(\.\d+)?\s+)?")


def _last_error_line(log: str, fallback: str) -> str:
    lines = [_STEP_PREFIX.sub("", line).strip() for line in plain(log or "").splitlines()]
    for line in reversed(lines):
        if re.search(r"error|failed|not found|no such", line, re.I) and not _RESTATED.search(line):
            return f"build failed: {line[:300]}"
    return plain(fallback)[:500]


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


def smoke(
    settings: HubSettings, built: BuildOutput, folder: Path, log: StageLog, abort: Abort | None = None
) -> SmokeOutput:
    """Start the built env, drive it like a client would, time it, stop it.

    Start → /health → /schema → reset → N steps with actions generated from the action schema →
    state → close, with a time limit on every call; then the runtime checks of `openenv validate
    --url`. Records the cold start (start → first reset reply) and step latency.

    `abort` (fired by the runner at the stage's deadline) cancels the test and stops the server.

    Raises:
        StageFailed: the server does not start, answers wrongly, crashes or hangs.
        Transient: the Docker engine stopped answering or restarted meanwhile (not the env's doing).
    """
    abort = abort or Abort()
    if built.builder != "docker":
        return asyncio.run(_abortable(_smoke(settings, built, folder, log, abort), abort))
    from openenv.client.providers._docker import docker_client
    from openenv.images import engine_epoch

    try:
        epoch = engine_epoch(docker_client())
    except Exception as exc:  # no engine to run the container on
        raise Transient(
            f"no Docker engine answers ({exc}); the smoke test waits for one", code=Transient.NO_ENGINE
        ) from exc
    try:
        return asyncio.run(_abortable(_smoke(settings, built, folder, log, abort), abort))
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
    from openenv.client.providers._docker import docker_client
    from openenv.images import engine_epoch

    try:
        client = docker_client()
        client.ping()
    except Exception as exc:
        return Transient(
            f"the Docker engine stopped answering during the smoke test ({exc})", code=Transient.ENGINE_LOST
        )
    now = engine_epoch(client)
    if epoch is not None and now is not None and now != epoch:
        return Transient("the Docker engine restarted during the smoke test", code=Transient.ENGINE_LOST)
    return None


def _declared(folder: Path) -> Any:
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
    if built.builder == "docker":
        from hub_service.pipeline.sandbox import confined_provider, grant
        from openenv.manifest import env_port

        overrides, _ = grant(settings, _declared(folder))
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

    read_only = built.builder == "docker"
    while True:
        provider = _provider(settings, built, folder, read_only=read_only)
        abort.on_abort(provider.stop)  # the container goes with an aborted stage, even if this loop is stuck
        start = time.monotonic()
        try:
            return provider, await provider.astart(), start
        except OpenEnvError as exc:
            text = str(exc)
            if read_only and "Read-only file system" in text:
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


async def _smoke(settings: HubSettings, built: BuildOutput, folder: Path, log: StageLog, abort: Abort) -> SmokeOutput:
    from openenv import GenericEnvClient
    from openenv.errors import EnvExecutionError, OpenEnvError

    declared = _declared(folder)
    if built.builder == "docker":
        from hub_service.pipeline.sandbox import grant

        for note in grant(settings, declared)[1]:
            log(note)
    provider, url, start = await _start(settings, built, folder, log, abort)
    log_shown = False
    errors: list[str] = []
    rewards: list[float] = []
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
        latencies: list[float] = []
        try:
            try:
                await client.reset(seed=0)
            except OpenEnvError as exc:
                raise StageFailed(f"reset failed: {_said(exc)}") from exc
            cold_start = time.monotonic() - start
            log(f"first reset reply after {cold_start:.2f}s (cold start)")
            actions = _actions(action_schema, settings.smoke_steps)
            rejected: list[str] = []
            for i, action in enumerate(actions):
                t0 = time.perf_counter()
                try:
                    result = await client.step(action)
                except EnvExecutionError as exc:
                    # An env may refuse an action (an illegal move, a word not in its list): that is an answer, not a
                    # crash, as long as the session lives on. The round trip still counts as a step's latency.
                    latencies.append((time.perf_counter() - t0) * 1e3)
                    rejected.append(str(exc))
                    log(f"step {i + 1}: action {_short(action)} rejected by the env: {_short(str(exc))}")
                    try:
                        await client.state()
                    except OpenEnvError as dead:
                        raise StageFailed(
                            f"the session did not survive a rejected action (step {i + 1}, {_short(action)}: {exc}): {_said(dead)}"
                        ) from dead
                    continue
                except OpenEnvError as exc:
                    raise StageFailed(f"step {i + 1} with {_short(action)} failed: {_said(exc)}") from exc
                latencies.append((time.perf_counter() - t0) * 1e3)
                if isinstance(result.reward, (int, float)):
                    rewards.append(result.reward)
                log(
                    f"step {i + 1}: action {_short(action)} → reward {result.reward}, done {result.done} ({latencies[-1]:.1f} ms)"
                )
                if result.done:
                    await client.reset()
            try:
                state = await client.state()
            except OpenEnvError as exc:
                raise StageFailed(f"state failed: {_said(exc)}") from exc
            log(f"state: {_short(state)}")
            if rejected:
                log(
                    f"{len(rejected)} of {len(actions)} actions were rejected by the env and its session lived on; the first: {_short(rejected[0])}"
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
        from hub_service.pipeline.trust import TrustContext, run_checks

        # The server's log as the smoke test left it, before the trust checks' hundreds of sessions
        # would push its start-up and the smoke run's lines out of the tail the stage log keeps.
        await _show_server_log(provider, log)
        log_shown = True
        trust = await run_checks(
            TrustContext(settings, url, provider, action_schema, declared, built.image_ref, dict(figures), log)
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
        )
    except StageFailed:
        raise
    except Exception as exc:
        raise StageFailed(f"smoke test error: {type(exc).__name__}: {exc}") from exc
    finally:
        if not log_shown:
            await _show_server_log(provider, log)
        await provider.astop()


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


def _said(exc: Exception) -> str:
    """A client error as the smoke verdict says it: a reply over the cap names the Hub's setting."""
    from openenv.errors import EnvDisconnectedError

    if isinstance(exc, EnvDisconnectedError) and exc.close_code == _MESSAGE_TOO_BIG:
        return f"{exc} (the Hub's cap for a reply: OPENENV_HUB_SMOKE_MESSAGE_MAX_MB)"
    return str(exc)


_MESSAGE_TOO_BIG = 1009  # the WebSocket close code for a message over the receiver's limit
_CHUNK = 1 << 16


class _TooLarge(Exception):
    pass


async def _get_json(url: str, timeout: float, max_mb: float) -> Any:
    """GET `url` as JSON, read in chunks: at most `max_mb` MB, and within `timeout` seconds in all
    (not per read: a server that drips a byte at a time is cut off too)."""
    import json
    import urllib.request

    limit = int(max_mb * (1 << 20))
    path = "/" + url.rsplit("/", 1)[-1]

    def fetch() -> Any:
        ends = time.monotonic() + timeout
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            declared = reply.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise _TooLarge()
            body = bytearray()
            while chunk := reply.read1(_CHUNK):
                body += chunk
                if len(body) > limit:
                    raise _TooLarge()
                if time.monotonic() > ends:
                    raise TimeoutError(f"the reply did not finish within {timeout:g}s (OPENENV_HUB_STEP_TIMEOUT_S)")
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


def _actions(schema: dict[str, Any], n: int) -> list[Any]:
    from openenv.validation import SchemaExampleError, example_from_schema

    try:
        return [example_from_schema(schema, variant=i) for i in range(n)]
    except SchemaExampleError as exc:
        raise StageFailed(f"cannot make an action from the action schema: {exc}") from exc


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0.0


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def describe_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()
