"""Play one episode the way a trainer would, record every step, and judge it by one rule.

Both `openenv validate --url` (openenv/validation/runtime.py) and the Hub's smoke stage
(hub_service/pipeline/stages.py) call `play_episode`; `judge` is the verdict rule that
docs/validate.md states. An env fails when

- the session dies: the connection ends, a reply does not come in time, or the server answers
  with an error code that means its session broke (anything but the refusal codes below);
- an error is internal: an error frame answers `reset` or `state` (there is no move to refuse);
- no step succeeds: every action built from the env's own schema (or every tool call with
  arguments built from the tool's input schema) got an error.

Refusals stay allowed, as long as some other step succeeds: `VALIDATION_ERROR` (the server's
check of the action) and `EXECUTION_ERROR` answered to a step (upstream's server sends that code
for any exception in `step`, an illegal move as much as a bug; the protocol does not tell them
apart, so the rule judges by what the env does next, never by the message), and a tool call's
`error` in a `CallToolObservation`. Every fact used is a protocol fact: error codes, which
request an error answered, the observation's structure. No text a server writes is read.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from openenv.validation.examples import SchemaExampleError, example_from_schema

__all__ = [
    "REFUSAL_CODES",
    "Episode",
    "StepRecord",
    "Verdict",
    "judge",
    "play_episode",
    "reset_when_free",
    "schema_actions",
]

# Error codes with which a server refuses one action and keeps the session (PROTOCOL.md).
REFUSAL_CODES = frozenset({"VALIDATION_ERROR", "EXECUTION_ERROR"})
_SHOWN = 300  # characters of what was sent or came back, kept per step


@dataclass(slots=True)
class StepRecord:
    """One request of the episode and its answer.

    Attributes:
        request: "reset", "step", "tools/list" or "state".
        sent: the action (or tool call) sent, shortened to text.
        outcome: "ok" (an observation or reply), "refused" (an error code in REFUSAL_CODES, or a
            tool call's error in the observation), "internal" (another error frame), or "died".
        code: the error code (or the tool error type), when there was one.
        got: what came back, shortened to text.
        ms: the round trip.
    """

    index: int
    request: str
    sent: str
    outcome: str
    got: str
    code: str | None = None
    ms: float = 0.0


@dataclass(slots=True)
class Verdict:
    ok: bool
    code: str  # "PASSED", "RESET_FAILED", "SESSION_DIED", "INTERNAL_ERROR", "NO_STEP_SUCCEEDED", "NO_ACTION"
    reason: str


@dataclass
class Episode:
    records: list[StepRecord] = field(default_factory=list)
    tools: list[str] | None = None  # the tools listed, for an MCP env
    accepted: list[Any] = field(default_factory=list)  # actions that returned an observation
    replies: list[dict[str, Any]] = field(default_factory=list)  # their reward and done, in the same order
    rewards: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)  # every step's round trip, refusals too
    state: Any = None
    release_wait_s: float = 0.0  # how long the server answered CAPACITY_REACHED before the reset was taken
    verdict: Verdict = field(default_factory=lambda: Verdict(False, "NO_ACTION", "not played"))
    path: str = "plain"  # the way in: "plain" (/ws frames) or "mcp-session" (openenv/validation/paths.py)

    def steps(self) -> list[StepRecord]:
        return [r for r in self.records if r.request == "step"]

    def as_data(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]


def judge(records: list[StepRecord]) -> Verdict:
    """The verdict rule (docs/validate.md), on an episode's records."""
    for r in records:
        if r.outcome == "died":
            return Verdict(False, "SESSION_DIED", f"the session died at {_where(r)}: {r.got}")
    for r in records:
        if r.outcome == "internal" or (r.outcome == "refused" and r.request in ("reset", "state")):
            return Verdict(False, "INTERNAL_ERROR", f"{_where(r)} was answered with {r.code}: {r.got}")
    steps = [r for r in records if r.request == "step"]
    if not steps:
        return Verdict(False, "NO_ACTION", "no action could be built from the action schema, so no step was played")
    done = [r for r in steps if r.outcome == "ok"]
    if not done:
        codes = sorted({r.code or "?" for r in steps})
        first = steps[0]
        return Verdict(
            False,
            "NO_STEP_SUCCEEDED",
            f"no step succeeded: {len(steps)} of {len(steps)} actions built from the schema got {', '.join(codes)}; "
            f"the first, {first.sent}: {first.got}",
        )
    refused = len(steps) - len(done)
    note = f"; {refused} refused (allowed: another step succeeded)" if refused else ""
    return Verdict(True, "PASSED", f"{len(done)} of {len(steps)} steps returned an observation{note}")


def _where(r: StepRecord) -> str:
    return f"step {r.index} ({r.sent})" if r.request == "step" else r.request


async def reset_when_free(client: Any, grace_s: float, /, **options: Any) -> tuple[Any, float]:
    """`client.reset(**options)`, tried again while the server answers CAPACITY_REACHED, for at most
    `grace_s`; returns the reset's result and the seconds spent waiting before the attempt that
    was taken.

    A server releases a closed session a moment after the client has gone: upstream's releases it
    only once the session's handler has finished, after an MCP env's tool session has ended. So a
    session opened just after another one closed can be refused by a server that holds one session
    at a time (upstream's default), and that says nothing about the env. Each refused try closes
    its connection (a refusing server closes it too) and the next reset opens a new one, so
    `client` must not own a provider that closing would stop.

    Raises:
        CapacityReachedError: the server still refused after `grace_s`; its text says how long it
            waited (the code cannot tell a session never released from places others hold).
    """
    from openenv.errors import CapacityReachedError

    started = time.monotonic()
    pause = 0.05
    while True:
        waited = time.monotonic() - started
        try:
            return await client.reset(**options), waited
        except CapacityReachedError as exc:
            if grace_s <= 0:
                raise
            await client.close()
            if time.monotonic() - started >= grace_s:
                raise CapacityReachedError(
                    f"{exc} (still refused after waiting {grace_s:g}s for a session closed before to be "
                    "released: it was not, or other clients hold every place)",
                    code=exc.code,
                    data=exc.data,
                    url=exc.url,
                ) from exc
            await asyncio.sleep(pause)
            pause = min(0.5, pause * 2)


def schema_actions(action_schema: dict[str, Any], n: int) -> list[Any]:
    """`n` actions built from `action_schema` (variants 0..n-1), each valid against it.

    Raises:
        SchemaExampleError: the schema cannot be followed.
    """
    return [example_from_schema(action_schema, variant=i) for i in range(n)]


def is_tool_schema(action_schema: dict[str, Any]) -> bool:
    """Whether the action is an MCP tool call (upstream's and our `CallToolAction`): its fields say so."""
    props = action_schema.get("properties")
    return isinstance(props, dict) and "tool_name" in props and "arguments" in props


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _observed(result: Any) -> str:
    return _short({"observation": result.observation, "reward": result.reward, "done": result.done})


MESSAGE_TOO_BIG = 1009  # the WebSocket close code for a message over the receiver's limit
_ADDRESS = re.compile(r" \[wss?://[^\]\s]+\]$")


def _error_outcome(exc: Exception) -> tuple[str, str | None]:
    """How an error answer counts: ("refused" | "internal" | "died", code)."""
    from openenv.errors import EnvDisconnectedError, EnvServerError, EnvTimeoutError

    if isinstance(exc, EnvDisconnectedError) and exc.close_code == MESSAGE_TOO_BIG:
        return "died", "MESSAGE_TOO_BIG"  # a reply over this client's max_message_size_mb
    if isinstance(exc, (EnvDisconnectedError, EnvTimeoutError)):
        return "died", type(exc).__name__
    if isinstance(exc, EnvServerError):
        if exc.code in REFUSAL_CODES:
            return "refused", exc.code
        if exc.code in ("FACTORY_ERROR", "SESSION_ERROR", "CAPACITY_REACHED"):
            return "died", exc.code  # the server closes (or has lost) the session after these
        return "internal", exc.code
    return "died", type(exc).__name__


def _said(exc: Exception, client: Any) -> str:
    """An error's text, without the server's address the client adds (it means nothing in a report)."""
    text = _ADDRESS.sub("", str(exc).replace(f" [{getattr(client, 'base_url', '')}]", ""))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _tool_error(observation: Any) -> str | None:
    """A tool call's failure, as the observation's structure carries it (`error.error_type`), or None."""
    error = observation.get("error") if isinstance(observation, dict) else None
    if isinstance(error, dict) and error:
        return str(error.get("error_type") or "error")
    return None


async def play_episode(
    client: Any,
    action_schema: dict[str, Any],
    steps: int,
    *,
    seed: int | None = 0,
    on_record: Callable[[StepRecord], None] | None = None,
    release_grace_s: float = 0.0,
) -> Episode:
    """reset, then `steps` steps, then state, on a connected `GenericEnvClient`; judged by `judge`.

    `release_grace_s`: how long the reset may wait for the server to release a session closed
    just before (`reset_when_free`); the reset's record times the attempt that was taken.

    For an MCP env (its action is a tool call) the tools are listed first (`tools/list`) and each
    step calls one of them in turn, with arguments built from its input schema. Never raises for
    what the server does: errors become records. `on_record` sees each record as it is made.
    """
    from openenv.errors import EnvClientError

    episode = Episode()

    def add(record: StepRecord) -> StepRecord:
        episode.records.append(record)
        if on_record is not None:
            on_record(record)
        return record

    t0 = time.perf_counter()
    try:
        first, waited = await reset_when_free(client, release_grace_s, **({"seed": seed} if seed is not None else {}))
    except EnvClientError as exc:
        outcome, code = _error_outcome(exc)
        add(StepRecord(0, "reset", "", "died" if outcome == "died" else "internal", _said(exc, client), code, _ms(t0)))
        return _judged(episode)
    episode.release_wait_s = round(waited, 3)
    add(StepRecord(0, "reset", "", "ok", _observed(first), None, round(_ms(t0) - waited * 1000, 3)))

    try:
        actions = await _actions(client, action_schema, steps, episode, add)
    except SchemaExampleError as exc:
        add(StepRecord(0, "step", "", "internal", f"no action can be built from the action schema: {exc}", None))
        return _judged(episode)
    except _Died:
        return _judged(episode)

    for i, action in enumerate(actions, start=1):
        t0 = time.perf_counter()
        try:
            result = await client.step(action)
        except EnvClientError as exc:
            episode.latencies_ms.append(_ms(t0))
            outcome, code = _error_outcome(exc)
            add(StepRecord(i, "step", _short(action), outcome, _said(exc, client), code, episode.latencies_ms[-1]))
            if outcome == "died":
                return _judged(episode)
            continue
        episode.latencies_ms.append(_ms(t0))
        failure = _tool_error(result.observation) if episode.tools is not None else None
        add(
            StepRecord(
                i,
                "step",
                _short(action),
                "refused" if failure else "ok",
                _observed(result),
                failure,
                episode.latencies_ms[-1],
            )
        )
        if not failure:
            episode.accepted.append(action)
            episode.replies.append({"reward": result.reward, "done": result.done})
            if isinstance(result.reward, (int, float)) and not isinstance(result.reward, bool):
                episode.rewards.append(float(result.reward))
        if result.done:
            try:
                await client.reset(seed=seed) if seed is not None else await client.reset()
            except EnvClientError as exc:
                outcome, code = _error_outcome(exc)
                add(StepRecord(i, "reset", "", "died" if outcome == "died" else "internal", _said(exc, client), code))
                return _judged(episode)

    t0 = time.perf_counter()
    try:
        episode.state = await client.state()
    except EnvClientError as exc:
        outcome, code = _error_outcome(exc)
        add(StepRecord(0, "state", "", "died" if outcome == "died" else "internal", _said(exc, client), code, _ms(t0)))
        return _judged(episode)
    add(StepRecord(0, "state", "", "ok", _short(episode.state), None, _ms(t0)))
    return _judged(episode)


class _Died(Exception):
    pass


async def _actions(
    client: Any, action_schema: dict[str, Any], n: int, episode: Episode, add: Callable[[StepRecord], StepRecord]
) -> list[Any]:
    """The actions to play: tool calls for an MCP env that lists its tools, else schema examples."""
    from openenv.errors import EnvClientError

    if not is_tool_schema(action_schema):
        return schema_actions(action_schema, n)
    t0 = time.perf_counter()
    try:
        tools = await client.list_tools(use_cache=False)
    except EnvClientError as exc:
        outcome, code = _error_outcome(exc)
        if outcome == "died":
            add(StepRecord(0, "tools/list", "{}", "died", _said(exc, client), code, _ms(t0)))
            raise _Died() from exc
        # No MCP endpoint on this session: the action schema is all there is to go by.
        add(StepRecord(0, "tools/list", "{}", "refused", _said(exc, client), code or "NO_TOOLS", _ms(t0)))
        return schema_actions(action_schema, n)
    add(StepRecord(0, "tools/list", "{}", "ok", _short([t.name for t in tools]), None, _ms(t0)))
    if not tools:
        return schema_actions(action_schema, n)
    episode.tools = [t.name for t in tools]
    tag = (action_schema.get("properties") or {}).get("type")
    base: dict[str, Any] = {}
    if isinstance(tag, dict) and "const" in tag:
        base["type"] = tag["const"]
    elif isinstance(tag, dict) and isinstance(tag.get("default"), str):
        base["type"] = tag["default"]
    out: list[Any] = []
    for i in range(max(n, len(tools))):
        tool = tools[i % len(tools)]
        arguments = example_from_schema(tool.input_schema or {"type": "object"}, variant=i // len(tools))
        out.append({**base, "tool_name": tool.name, "arguments": arguments if isinstance(arguments, dict) else {}})
    return out


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _judged(episode: Episode) -> Episode:
    episode.verdict = judge(episode.records)
    return episode
