"""Runtime checks of a running env server: HTTP endpoints, a WebSocket episode, error handling, latency.

The episode is driven with `GenericEnvClient`, the way a trainer would, and judged by the rule
the Hub's smoke stage applies too (openenv/validation/episode.py, docs/validate.md): actions
come from the server's own action schema, and an MCP env's tools are listed and then called. An
MCP env is played on the MCP session path too, the one upstream's MCPToolClient takes, and that
path decides (openenv/validation/paths.py). Error handling is checked on a second, raw
connection that sends frames no client would.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from openenv._http import read_within
from openenv.client import GenericEnvClient
from openenv.client._transport import Connection, ws_url_for
from openenv.errors import EnvClientError, EnvDisconnectedError, EnvServerError
from openenv.protocol import STATE_REQUEST, loads
from openenv.validation.episode import REFUSAL_CODES, is_tool_schema, reset_when_free
from openenv.validation.mcp_session import McpSessionClient
from openenv.validation.paths import MCP_SESSION_PATH, play_paths
from openenv.validation.registry import REGISTRY, Finding, define, ok, problem, skipped, to_result
from openenv.validation.report import CheckResult, Report, Target

__all__ = ["validate_url", "validate_url_async"]

REACHABLE = define(
    "runtime.reachable",
    "The server answers HTTP",
    severity="error",
    stage="runtime",
    remediation="start the server (`openenv serve PATH`) and check the URL and port",
)
HEALTH = define(
    "runtime.health",
    "GET /health reports healthy",
    severity="error",
    stage="runtime",
    remediation="make the env factory work: /health is 503 while the env cannot be built; see the server log",
)
METADATA = define(
    "runtime.metadata",
    "GET /metadata describes the env",
    severity="warning",
    stage="runtime",
    remediation="serve the app made by openenv.create_app, or return name and description from /metadata",
)
SCHEMA = define(
    "runtime.schema",
    "GET /schema gives action, observation and state schemas",
    severity="error",
    stage="runtime",
    gate=True,
    remediation="serve the app made by openenv.create_app (it provides /schema)",
)
OPENAPI = define(
    "runtime.openapi",
    "The OpenAPI document has version 1.x",
    severity="warning",
    stage="runtime",
    remediation="serve the app made by openenv.create_app; clients read /openapi.json's info.version",
)
RESET = define(
    "runtime.reset",
    "A WebSocket session resets",
    severity="error",
    stage="runtime",
    remediation="check reset() of the environment; the message shows the server's error",
)
STEP = define(
    "runtime.step",
    "An episode of actions built from the schema: some step succeeds, no internal error, the session lives",
    severity="error",
    stage="runtime",
    remediation="check step() (the steps show what was sent and what came back); give the action's fields "
    "`examples` so tools can build a valid one",
)
STATE = define(
    "runtime.state",
    "state returns episode_id and step_count",
    severity="error",
    stage="runtime",
    remediation="make the state property return a State (episode_id, step_count)",
)
ERRORS = define(
    "runtime.errors",
    "Bad frames get error replies and the session survives",
    severity="warning",
    stage="runtime",
    remediation="serve the app made by openenv.create_app, which answers bad frames with error codes",
)
LATENCY = define(
    "runtime.latency",
    "Step round trips are fast",
    severity="warning",
    stage="runtime",
    remediation="make step() cheaper, or move blocking work off the event loop (Environment.EXECUTION)",
)

_IDS = (REACHABLE, HEALTH, METADATA, SCHEMA, OPENAPI, RESET, STEP, STATE, ERRORS, LATENCY)


@dataclass
class _Run:
    url: str
    headers: dict[str, str]
    timeout_s: float
    results: list[CheckResult] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    action: Any = None
    name: str | None = None
    unsupported: str | None = None

    def record(self, check_id: str, finding: Finding, started: float | None = None) -> Finding:
        elapsed = round((time.perf_counter() - started) * 1000, 2) if started is not None else None
        self.results.append(to_result(REGISTRY[check_id], finding, elapsed))
        return finding

    def skip_rest(self, ids: list[str], reason: str) -> None:
        for check_id in ids:
            if not any(r.id == check_id for r in self.results):
                self.record(check_id, skipped(reason))

    async def get(self, path: str) -> tuple[int, Any]:
        """GET `path`; returns (status, parsed JSON or None). Raises OSError when unreachable."""
        return await asyncio.to_thread(_http_get, self.url.rstrip("/") + path, self.headers, self.timeout_s)


MAX_REPLY_MB = 16  # an env server's /health, /metadata, /schema or /openapi.json reply, at most


class _Oversized:
    """Stands for a reply that was cut off at MAX_REPLY_MB instead of read whole."""

    def __str__(self) -> str:
        return f"(a reply over {MAX_REPLY_MB} MB, not read)"


def _said(body: Any) -> str:
    return f" {body}" if isinstance(body, _Oversized) else ""


def _http_get(url: str, headers: dict[str, str], timeout_s: float, body: Any = None) -> tuple[int, Any]:
    """GET `url` (or POST `body` as JSON, when given): at most MAX_REPLY_MB read, and within
    `timeout_s` in all (a server that drips bytes is cut off too). The reply's body is parsed
    JSON, None, or _Oversized."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Accept": "application/json", **({"Content-Type": "application/json"} if data else {}), **headers},
        method="POST" if data is not None else "GET",
    )
    limit, ends = MAX_REPLY_MB << 20, time.monotonic() + timeout_s
    late = f"{request.get_method()} {url} did not finish within {timeout_s:g}s"
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            status, body = reply.status, read_within(reply, limit, ends, late)
    except urllib.error.HTTPError as exc:
        status, body = exc.code, read_within(exc, limit, ends, late)
    if body is None:
        return status, _Oversized()
    try:
        return status, json.loads(body) if body else None
    except ValueError:
        return status, None


async def _http_checks(run: _Run) -> bool:
    started = time.perf_counter()
    deadline = time.monotonic() + run.timeout_s
    try:
        status, body = await run.get("/health")
        while status == 503 and time.monotonic() < deadline:  # still starting: the env is warming up
            await asyncio.sleep(0.5)
            status, body = await run.get("/health")
    except OSError as exc:
        run.record(REACHABLE, problem(f"cannot reach {run.url}: {getattr(exc, 'reason', exc)}"), started)
        return False
    run.record(REACHABLE, ok(f"{run.url} answers"), started)
    if status == 200 and isinstance(body, dict) and body.get("status") == "healthy":
        run.record(HEALTH, ok("healthy", **{k: v for k, v in body.items() if k != "status"}), started)
    elif status == 200:
        run.record(
            HEALTH,
            problem(f"/health answered 200 but not {{'status': 'healthy'}}: {str(body)[:200]}", severity="warning"),
            started,
        )
    else:
        run.record(HEALTH, problem(f"/health answered {status}: {str(body)[:300]}"), started)

    started = time.perf_counter()
    status, body = await run.get("/metadata")
    if status == 200 and isinstance(body, dict) and body.get("name"):
        run.name = str(body["name"])
        run.record(METADATA, ok(f"name {body['name']!r}", protocol=body.get("protocol")), started)
    else:
        run.record(METADATA, problem(f"/metadata answered {status} without a name{_said(body)}"), started)

    started = time.perf_counter()
    status, body = await run.get("/schema")
    if (
        status == 200
        and isinstance(body, dict)
        and all(isinstance(body.get(k), dict) for k in ("action", "observation"))
    ):
        run.schema = body
        missing_state = "" if isinstance(body.get("state"), dict) else " (no state schema)"
        run.record(SCHEMA, ok("action, observation and state schemas" + missing_state), started)
    elif status == 404:
        run.unsupported = f"{run.url} has no /schema: it is not an OpenEnv server"
        run.record(SCHEMA, problem(run.unsupported), started)
        return False
    else:
        run.record(
            SCHEMA, problem(f"/schema answered {status} without action and observation schemas{_said(body)}"), started
        )

    started = time.perf_counter()
    status, body = await run.get("/openapi.json")
    version = body.get("info", {}).get("version") if isinstance(body, dict) else None
    if isinstance(version, str) and version.startswith("1."):
        run.record(OPENAPI, ok(f"info.version {version}"), started)
    else:
        run.record(
            OPENAPI,
            problem(f"/openapi.json answered {status} with info.version {version!r}, not 1.x{_said(body)}"),
            started,
        )
    return True


EPISODE_STEPS = 5  # steps of the checked episode (the Hub's smoke stage plays OPENENV_HUB_SMOKE_STEPS)


async def _episode(run: _Run, latency_steps: int, latency_budget_ms: float) -> None:
    client = GenericEnvClient(
        run.url, headers=run.headers, connect_timeout_s=run.timeout_s, message_timeout_s=run.timeout_s
    )
    repeat: GenericEnvClient | McpSessionClient = client
    try:
        started = time.perf_counter()
        schema = run.schema.get("action") if run.schema else None
        if not isinstance(schema, dict):
            schema = {"type": "object"}
        # The same episode and verdict rule as the Hub's smoke stage (openenv/validation/episode.py), on
        # the path an MCP env's users take too (openenv/validation/paths.py). The session of a check
        # before (the Hub's own episode) may still be being released.
        episode = await play_paths(client, schema, EPISODE_STEPS, seed=None, release_grace_s=run.timeout_s)
        reset = episode.records[0]
        if reset.outcome != "ok":
            run.record(RESET, problem(f"reset failed: {reset.got}", code=reset.code), started)
            run.skip_rest([STEP, STATE, LATENCY], "the session did not reset")
            return
        waited = episode.release_wait_s
        said = f" (after {waited:.2f}s of CAPACITY_REACHED while the server released a session)" if waited else ""
        run.record(RESET, ok(f"reset returned an observation{said}", observation=reset.got), started)
        verdict = episode.verdict
        details: dict[str, Any] = {"verdict": verdict.code, "path": episode.path, "steps": episode.as_data()}
        if episode.tools is not None:
            details["tools"] = episode.tools
        if verdict.ok:
            run.action = episode.accepted[0]
            run.record(STEP, ok(verdict.reason, action=run.action, **episode.replies[0], **details), started)
        else:
            run.record(STEP, problem(verdict.reason, **details), started)
        state = next((r for r in episode.records if r.request == "state"), None)
        if state is not None and state.outcome == "ok":
            value = episode.state
            if isinstance(value, dict) and isinstance(value.get("step_count"), int) and "episode_id" in value:
                run.record(STATE, ok(f"step_count {value['step_count']}", episode_id=value.get("episode_id")), started)
            else:
                run.record(STATE, problem(f"the state lacks episode_id/step_count: {str(value)[:200]}"), started)
        elif state is not None:
            run.record(STATE, problem(f"state failed: {state.got}", code=state.code), started)
        else:
            run.skip_rest([STATE], "the session ended before state was asked (see runtime.step)")
        if run.action is None:
            run.skip_rest([LATENCY], "no action was accepted (see runtime.step)")
            return
        # The repeated step goes the way the episode went; for an MCP env play_paths closed the
        # episode's sessions, so a new one is reset first.
        repeat = McpSessionClient.like(client) if episode.path == MCP_SESSION_PATH else client
        if is_tool_schema(schema):
            try:
                await reset_when_free(repeat, run.timeout_s)
            except EnvClientError as exc:
                run.record(LATENCY, problem(f"no session to repeat the step in: {exc}"), started)
                return
        await _latency(run, repeat, latency_steps, latency_budget_ms)
    finally:
        await client.close()
        if repeat is not client:
            await repeat.close()


async def _latency(run: _Run, client: GenericEnvClient | McpSessionClient, steps: int, budget_ms: float) -> None:
    started = time.perf_counter()
    samples: list[float] = []
    try:
        for _ in range(max(1, steps)):
            t0 = time.perf_counter()
            try:
                result = await client.step(run.action)
            except EnvServerError as exc:
                if exc.code not in REFUSAL_CODES:
                    raise
                samples.append((time.perf_counter() - t0) * 1000)  # a refusal (a move no longer legal) is an answer
                continue
            samples.append((time.perf_counter() - t0) * 1000)
            if result.done:
                await client.reset()
    except EnvClientError as exc:
        run.record(LATENCY, problem(f"a repeated step failed after {len(samples)} steps: {exc}"), started)
        return
    p50 = statistics.median(samples)
    p95 = sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]
    details: dict[str, Any] = {
        "steps": len(samples),
        "p50_ms": round(p50, 3),
        "p95_ms": round(p95, 3),
        "budget_ms": budget_ms,
    }
    if p50 <= budget_ms:
        run.record(LATENCY, ok(f"median step {p50:.2f} ms over {len(samples)} steps", **details), started)
    else:
        run.record(LATENCY, problem(f"median step {p50:.0f} ms is over {budget_ms:g} ms", **details), started)


def _code(reply: Any) -> str | None:
    """An error frame's code (None for any other reply)."""
    return reply.get("data", {}).get("code") if isinstance(reply, dict) and reply.get("type") == "error" else None


async def _probe_session(run: _Run, frame: bytes) -> tuple[Connection, Any]:
    """A new session and its reply to `frame`, opened again while the server answers
    CAPACITY_REACHED (for at most the run's timeout): it may still be releasing the episode's
    session, closed a moment ago (see `reset_when_free`). The last connection and reply (or the
    client error the frame met) are returned."""
    ends = time.monotonic() + run.timeout_s
    pause = 0.05
    while True:
        conn = await Connection.open(
            ws_url_for(run.url), headers=run.headers, timeout_s=run.timeout_s, max_message_bytes=16 << 20
        )
        try:
            reply: Any = loads(await conn.call(frame, run.timeout_s))
        except EnvClientError as exc:  # the probe's own outcome (the session ended, or no reply): judged by the caller
            return conn, exc
        except BaseException:
            await conn.close()
            raise
        if _code(reply) != "CAPACITY_REACHED" or time.monotonic() >= ends:
            return conn, reply
        await conn.close()
        await asyncio.sleep(pause)
        pause = min(0.5, pause * 2)


async def _error_handling(run: _Run) -> None:
    started = time.perf_counter()
    probes = [
        (b"this is not json", "INVALID_JSON"),
        (b'{"type": "no-such-type"}', "UNKNOWN_TYPE"),
        (b'{"type": "step", "data": {"__openenv_validate_unknown_field__": 1}}', "VALIDATION_ERROR"),
    ]
    try:
        conn, first = await _probe_session(run, probes[0][0])
    except EnvClientError as exc:
        run.record(ERRORS, problem(f"could not open a second session: {exc}"), started)
        return
    if _code(first) == "CAPACITY_REACHED":
        await conn.close()
        run.record(
            ERRORS,
            problem(
                f"the server still refused a new session (CAPACITY_REACHED) {run.timeout_s:g}s after the episode's "
                "session was closed: it did not release that session, or other clients hold every place"
            ),
            started,
        )
        return
    wrong: list[str] = []
    try:
        for i, (frame, code) in enumerate(probes):
            if i > 0:
                reply = loads(await conn.call(frame, run.timeout_s))
            elif isinstance(first, EnvClientError):
                raise first
            else:
                reply = first
            got = _code(reply)
            if got != code:
                wrong.append(f"{frame[:30]!r} got {got or str(reply)[:60]!r}, expected {code}")
        reply = loads(await conn.call(STATE_REQUEST, run.timeout_s))
        if not (isinstance(reply, dict) and reply.get("type") == "state"):
            wrong.append(f"after the bad frames, state got {str(reply)[:80]}")
    except EnvDisconnectedError as exc:
        run.record(ERRORS, problem(f"a bad frame ended the session: {exc}", severity="error"), started)
        return
    except EnvClientError as exc:
        run.record(ERRORS, problem(f"no reply to a bad frame: {exc}"), started)
        return
    finally:
        await conn.close()
    if wrong:
        run.record(ERRORS, problem("; ".join(wrong)), started)
    else:
        run.record(
            ERRORS, ok("bad JSON, unknown types and invalid actions get error frames; the session survives"), started
        )


async def validate_url_async(
    url: str,
    *,
    token: str | None = None,
    timeout_s: float = 15.0,
    latency_steps: int = 20,
    latency_budget_ms: float = 1000.0,
    strict: bool = False,
) -> Report:
    """Run the runtime checks against a running server.

    Args:
        url: the server's root, e.g. "http://127.0.0.1:8000" or a Space's URL.
        token: bearer token (private Spaces).
        timeout_s: limit for each request, and for the server to report healthy.
        latency_steps: steps timed by runtime.latency.
        latency_budget_ms: median step time above which runtime.latency warns.
        strict: count warnings as failures.

    Returns:
        The report (never raises for a bad server; a bug in the validator gives status "error").
    """
    from openenv import __version__

    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    run = _Run(url.rstrip("/"), headers, timeout_s)
    error: str | None = None
    all_ids = list(_IDS)
    try:
        if await _http_checks(run):
            await _episode(run, latency_steps, latency_budget_ms)
            await _error_handling(run)
        run.skip_rest(all_ids, "the server is unreachable or not an OpenEnv server")
    except Exception as exc:  # a validator bug: report it (exit 3), never a traceback at the user
        error = f"runtime validation crashed: {type(exc).__name__}: {exc}"
        run.skip_rest(all_ids, "not run: the validator crashed")
    order = {cid: i for i, cid in enumerate(all_ids)}
    results = sorted(run.results, key=lambda r: order.get(r.id, 99))
    report = Report(tool_version=__version__, target=Target(url=url, name=run.name), strict=strict, checks=results)
    report.duration_ms = round((time.perf_counter() - started) * 1000, 1)
    return report.finish(unsupported=run.unsupported, error=error)


def validate_url(url: str, **kwargs: Any) -> Report:
    """Blocking `validate_url_async` (safe in scripts, threads and notebooks)."""
    from openenv.client.sync import run_sync

    return run_sync(validate_url_async(url, **kwargs))
