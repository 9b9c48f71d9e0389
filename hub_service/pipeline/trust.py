"""Trust signals, measured at the end of the smoke stage while its server is still up.

Three checks, each bounded in time and failing softly (a check that cannot run is recorded as
`{"verdict": "unchecked", "reason": ...}`; the smoke verdict never depends on them):

- the capacity card: the smoke run's figures, the image's size, the server's memory with no
  session, per idle and per active session, and how many concurrent sessions it holds (a ramp of
  1, 2, 4, ... sessions that stops at the first level with an error or a p99 step latency over
  the Hub's limit, or when its time budget runs out), how long it takes to free the places of
  sessions closed before (measured apart: a slow release is not less capacity), and whether
  sessions leak (opened and closed one at a time, they must all be taken, and none counted open
  afterwards);
- determinism: the same seed and the same actions in two fresh sessions must give the same
  observations, rewards and done flags (an env that declares `stochastic: true` is reported,
  never flagged);
- reward sanity: a seeded random policy of legal actions and its returns (the env's random
  baseline; none where actions are free-form), the rewards it saw against the declared range, and
  probes with an empty, a long and an oversized answer (hub_service/pipeline/trust_reward.py).

`hub_service.pipeline.trust_checks.run_checks` runs them; this module holds the first two and
the helpers the reward check shares.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hub_service.settings import HubSettings

__all__ = ["SEED", "TrustContext", "capacity_check", "determinism_check", "random_actions", "session_client"]

SEED = 1234  # the seed of the determinism check, the random policy and the probes
_SHOWN = 200  # characters of a value shown in a finding


@dataclass
class TrustContext:
    """What the checks need of the smoke stage: its server, the env's declarations, its figures."""

    settings: HubSettings
    url: str
    provider: Any
    action_schema: dict[str, Any]
    declared: Any  # openenv.declared.Declared
    image_ref: str | None
    figures: dict[str, float]  # cold_start_s, step_p50_ms, step_p95_ms of the smoke run
    log: Callable[[str], None]
    # The way in the smoke episode found decides (openenv/validation/paths.py): "mcp-session" for an
    # MCP env whose users' client takes its MCP session path, else "plain" (the /ws session).
    path: str = "plain"


# -- sessions (these helpers are shared with trust_reward) ----------------------------------------


def session_client(ctx: TrustContext, *, plain: bool = False) -> Any:
    """A client of one session of the server, on the path the smoke episode took (`ctx.path`): the
    checks then see the env as its users' client does, and an MCP env's plain path that hangs does
    not read as a leak or as no answer. `plain`: the /ws session whatever the path (the protocol's
    extensions, such as fork, live there only)."""
    from openenv import GenericEnvClient
    from openenv.validation.mcp_session import McpSessionClient
    from openenv.validation.paths import MCP_SESSION_PATH

    s = ctx.settings
    kind = McpSessionClient if ctx.path == MCP_SESSION_PATH and not plain else GenericEnvClient
    return kind(
        ctx.url,
        message_timeout_s=s.step_timeout_s,
        connect_timeout_s=s.step_timeout_s,
        max_message_size_mb=s.smoke_message_max_mb,
    )


async def first_reset(ctx: TrustContext, client: Any, seed: int) -> Any:
    """The reset that opens a check's session: a server may still be releasing the session the
    check before closed, so CAPACITY_REACHED is waited out for at most the Hub's
    `trust_release_grace_s` (`reset_when_free`), not counted against the env."""
    return (await _reset_released(ctx, client, seed))[0]


async def _reset_released(ctx: TrustContext, client: Any, seed: int) -> tuple[Any, float]:
    """`first_reset`, with the seconds it waited for a place to be released."""
    from openenv.validation.episode import reset_when_free

    return await reset_when_free(client, ctx.settings.trust_release_grace_s, seed=seed)


async def _close_all(clients: list[Any]) -> None:
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


def random_actions(ctx: TrustContext, n: int, seed: int = SEED) -> list[dict[str, Any]]:
    from hub_service.play.policies import random_action

    rng = random.Random(seed)
    return [random_action(ctx.action_schema, rng) for _ in range(n)]


# -- determinism ---------------------------------------------------------------------------------


async def determinism_check(ctx: TrustContext) -> dict[str, Any]:
    actions = random_actions(ctx, ctx.settings.determinism_steps)
    varying = list(ctx.declared.varying_fields)
    first = [_without(o, varying) for o in await _play(ctx, actions)]
    second = [_without(o, varying) for o in await _play(ctx, actions)]
    diff = _first_difference(first, second)
    out: dict[str, Any] = {"seed": SEED, "steps": len(first) - 1, "first_difference": diff}
    if varying:
        out["ignored_fields"] = varying  # declared as varying by design (openenv.yaml validation.varying_fields)
    if diff is not None:  # what differs in all: a wall-clock field alone reads differently from diverging rewards
        out["differing_fields"] = _differing_fields(first, second)
        out["rewards_match"] = [(o.get("reward"), o.get("done")) for o in first] == [
            (o.get("reward"), o.get("done")) for o in second
        ]
    if ctx.declared.stochastic:
        out.update(verdict="stochastic", difference_seen=diff is not None)
    else:
        out["verdict"] = "nondeterministic" if diff else "deterministic"
    return out


async def _play(ctx: TrustContext, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outcomes of reset(seed) and then `actions` in a fresh session (until the episode ends); an
    action the env refuses is an outcome too (its error's text)."""
    from openenv.errors import EnvExecutionError

    client = session_client(ctx)
    try:
        outcomes = [_outcome(await first_reset(ctx, client, SEED))]
        for action in actions:
            try:
                result = await client.step(action)
            except EnvExecutionError as exc:
                outcomes.append({"error": unlinked(str(exc), ctx.url)})
                continue
            outcomes.append(_outcome(result))
            if result.done:
                break
        return outcomes
    finally:
        await client.close()


def _without(outcome: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """`outcome` less the fields at the dotted `paths` (copied where it changes; absent paths are ignored)."""
    for path in paths:
        *parents, last = path.split(".")
        trail = [outcome]
        for key in parents:
            nxt = trail[-1].get(key) if isinstance(trail[-1], dict) else None
            if not isinstance(nxt, dict):
                break
            trail.append(nxt)
        else:
            if last in trail[-1]:
                copies = [dict(d) for d in trail]
                del copies[-1][last]
                for parent, key, child in zip(copies, parents, copies[1:], strict=False):
                    parent[key] = child
                outcome = copies[0]
    return outcome


def _outcome(result: Any) -> dict[str, Any]:
    return {"observation": result.observation, "reward": result.reward, "done": bool(result.done)}


def _first_difference(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> dict[str, Any] | None:
    for step, (a, b) in enumerate(zip(first, second, strict=False)):
        found = _diff(a, b, "")
        if found is not None:
            where, x, y = found
            return {"step": step, "field": where, "first": _shown(x), "second": _shown(y)}
    if len(first) != len(second):  # cannot happen without a done flag differing first; kept for safety
        step = min(len(first), len(second))
        return {"step": step, "field": "episode length", "first": len(first) - 1, "second": len(second) - 1}
    return None


def _differing_fields(first: list[dict[str, Any]], second: list[dict[str, Any]], most: int = 10) -> list[str]:
    fields: list[str] = []
    for a, b in zip(first, second, strict=False):
        for where in _all_diffs(a, b, ""):
            if where not in fields:
                fields.append(where)
            if len(fields) >= most:
                return fields
    return fields


def _all_diffs(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}.{key}" if path else str(key)
            out += [where] if key not in a or key not in b else _all_diffs(a[key], b[key], where)
        return out
    return [path] if _diff(a, b, path) is not None else []


_MISSING = "<missing>"


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return where, a.get(key, _MISSING), b.get(key, _MISSING)
            found = _diff(a[key], b[key], where)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return None if same and type(a) is type(b) else (path, a, b)


def _shown(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return shorten(text, _SHOWN)


def unlinked(text: str, url: str) -> str:
    """An error's text without the server's address on this worker (which means nothing to users)."""
    return text.replace(f" [{url}]", "")


def shorten(text: str, n: int) -> str:
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def is_refusal(exc: Exception) -> bool:
    from openenv.errors import EnvExecutionError, InvalidActionError

    return isinstance(exc, (EnvExecutionError, InvalidActionError))


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- capacity ------------------------------------------------------------------------------------


async def capacity_check(ctx: TrustContext) -> dict[str, Any]:
    from hub_service.pipeline import trust_memory
    from openenv.errors import OpenEnvError

    card: dict[str, Any] = {"verdict": "measured", **ctx.figures, "image_size_mb": None, "notes": []}
    if ctx.image_ref:
        card["image_size_mb"] = round(await asyncio.to_thread(trust_memory.image_size_mb, ctx.image_ref), 1)
    health = await trust_memory.health(ctx.url)
    server_max = health.get("max_sessions") if isinstance(health.get("max_sessions"), int) else None
    memory = trust_memory.reader(ctx.provider)
    await trust_memory.wait_sessions(ctx.url, lambda n: n == 0)
    card["server_base_mb"] = base = await memory()
    card.update(idle_session_mb=None, active_session_mb=None)
    if base is None:
        card["notes"].append(f"the memory of a {getattr(ctx.provider, 'kind', 'server')} of this kind cannot be read")
    try:
        card.update(await _per_session(ctx, memory, base, server_max))
    except OpenEnvError as exc:  # sessions refused or failing: the ramp below says how far the server gets
        card["notes"].append(f"memory per session not measured: {shorten(unlinked(str(exc), ctx.url), 300)}")
    card.update(await _ramp(ctx, server_max))
    card["flags"] = await _leaks(ctx)
    return card


async def _leaks(ctx: TrustContext) -> list[str]:
    """Sessions must not pile up: with every earlier session closed, `capacity_leak_sessions`
    sessions opened and closed one at a time must all be taken, and a server that counts its
    sessions must count none afterwards. Returns the findings (empty: no leak seen)."""
    from hub_service.pipeline import trust_memory
    from openenv.errors import OpenEnvError

    n = ctx.settings.capacity_leak_sessions
    for i in range(n):
        try:
            client = await _open(ctx, i)  # a moment for the server to release the session closed before
        except OpenEnvError as exc:
            return [
                f"sessions leak: with every earlier session closed, the server refused session {i + 1} of {n} "
                f"opened one at a time: {shorten(unlinked(str(exc), ctx.url), 300)}"
            ]
        await client.close()
    await trust_memory.wait_sessions(ctx.url, lambda k: k == 0)
    active = (await trust_memory.health(ctx.url)).get("active_sessions")
    if isinstance(active, int) and not isinstance(active, bool) and active > 0:
        return [f"sessions leak: the server still counts {active} open sessions after every client closed"]
    return []


async def _per_session(
    ctx: TrustContext, memory: Callable[[], Awaitable[float | None]], base: float | None, server_max: int | None
) -> dict[str, Any]:
    """Memory per session: `k` sessions opened and idle, then the same after a reset and a few
    steps each (the increase over the server's `base`, divided by `k`)."""
    from hub_service.pipeline import trust_memory

    s = ctx.settings
    k = min(s.capacity_memory_sessions, server_max or s.capacity_memory_sessions)
    clients = [session_client(ctx) for _ in range(k)]
    try:
        # Every connect ends before any is closed: a session made after its neighbour failed would
        # otherwise be left open, holding the server's place (an MCP session lives until closed).
        opened = await asyncio.gather(*(c.connect() for c in clients), return_exceptions=True)
        failed = next((r for r in opened if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        await trust_memory.wait_sessions(ctx.url, lambda n: n >= k)
        idle = await memory()
        actions = random_actions(ctx, s.capacity_steps)
        await asyncio.gather(*(_exercise(c, i, actions) for i, c in enumerate(clients)))
        active = await memory()
    finally:
        await _close_all(clients)
    return {
        "idle_session_mb": _per(idle, base, k),
        "active_session_mb": _per(active, base, k),
        "memory_sessions": k,
    }


def _per(total: float | None, base: float | None, k: int) -> float | None:
    """Memory per session: the increase over the server's base, shared by `k` sessions."""
    return None if total is None or base is None else round(max(0.0, total - base) / k, 3)


async def _exercise(client: Any, seed: int, actions: list[dict[str, Any]]) -> list[float]:
    """reset and step `client` through `actions`; returns each step's latency in ms (a refused
    action is an answer and counts)."""
    from openenv.errors import EnvServerError

    await client.reset(seed=seed)
    latencies = []
    for action in actions:
        t0 = time.perf_counter()
        try:
            result = await client.step(action)
        except EnvServerError as exc:
            if not is_refusal(exc):
                raise
            latencies.append((time.perf_counter() - t0) * 1e3)
            continue
        latencies.append((time.perf_counter() - t0) * 1e3)
        if result.done:
            await client.reset(seed=seed)
    return latencies


def _levels(top: int) -> list[int]:
    levels, n = [], 1
    while n < top:
        levels.append(n)
        n *= 2
    return [*levels, top]


class _Clock:
    """The ramp's time budget, with the time the server takes to free the places of sessions
    closed before set apart (a slow release is measured on its own, never read as less capacity)."""

    def __init__(self, budget_s: float) -> None:
        self.ends = time.monotonic() + budget_s
        self.release_s = 0.0  # the longest one level waited for places to be freed

    def left(self) -> float:
        return self.ends - time.monotonic()

    def released(self, waited: float) -> None:
        """`waited` seconds went to waiting for the server to free places: not the ramp's time."""
        self.ends += waited

    async def within(self, work: Awaitable[Any], extra: float = 0.0) -> Any:
        """`work`'s result, if it ends within the time left (plus `extra`).

        Raises:
            _OutOfTime: it did not (a timeout of the env's own is its error, as it was).
        """
        from openenv.errors import OpenEnvError

        try:
            return await asyncio.wait_for(work, max(0.0, self.left() + extra))  # (none left: cancelled at once)
        except TimeoutError as exc:
            if isinstance(exc, OpenEnvError):  # EnvTimeoutError: a session's, not the ramp's
                raise
            raise _OutOfTime from None


class _OutOfTime(Exception):
    """The ramp's time budget ran out."""


async def _ramp(ctx: TrustContext, server_max: int | None) -> dict[str, Any]:
    s = ctx.settings
    ramp: list[dict[str, Any]] = []
    held = 0
    stopped = f"held the ramp's top, {s.capacity_max_sessions} sessions (OPENENV_HUB_CAPACITY_MAX_SESSIONS)"
    clock = _Clock(s.capacity_budget_s)
    actions = random_actions(ctx, s.capacity_steps, seed=SEED + 1)
    for level in _levels(s.capacity_max_sessions):
        if clock.left() <= 0:
            stopped = f"the ramp's time budget ({s.capacity_budget_s:g}s, OPENENV_HUB_CAPACITY_BUDGET_S) ran out before {level} sessions"
            break
        try:
            latencies, errors = await _level(ctx, level, actions, clock)
        except _OutOfTime:
            ramp.append({"sessions": level, "p99_ms": None, "errors": None})
            stopped = f"the ramp's time budget ({s.capacity_budget_s:g}s, OPENENV_HUB_CAPACITY_BUDGET_S) ran out during {level} sessions"
            break
        p99 = _p99(latencies)
        ramp.append({"sessions": level, "p99_ms": p99, "errors": len(errors)})
        if errors:
            cap = f" (the server's own cap is {server_max})" if server_max is not None and level > server_max else ""
            stopped = f"{len(errors)} of {level} sessions failed{cap}: {shorten(errors[0], 300)}"
            break
        if p99 is not None and p99 > s.capacity_p99_ms:
            stopped = f"p99 step latency {p99:.0f} ms at {level} sessions, over {s.capacity_p99_ms:g} ms (OPENENV_HUB_CAPACITY_P99_MS)"
            break
        held = level
    # A ramp whose budget ran out before it held one session measured nothing: "unmeasured", never
    # 0 sessions (a busy host's doing is not the env's capacity). A server slower than the p99 bound
    # at one session, or failing it, did hold 0: that is measured.
    unmeasured = held == 0 and "time budget" in stopped
    return {
        "sessions_held": None if unmeasured else held,
        "release_s": round(clock.release_s, 3),
        "ramp": ramp,
        "stopped_because": stopped,
    }


async def _level(
    ctx: TrustContext, n: int, actions: list[dict[str, Any]], clock: _Clock
) -> tuple[list[float], list[str]]:
    """Hold `n` sessions at once, reset and step each concurrently; their latencies and errors.

    The sessions of the level before were closed, but a server releases a closed session a moment
    later (and upstream's /health does not count them): each session of this level is opened in
    turn, waiting up to the Hub's `trust_release_grace_s` while the server still answers
    CAPACITY_REACHED. Those already opened stay open, so a wait ends only when an earlier level's
    session is gone, and the level still needs `n` sessions held together. The waits are the
    server's release time, set apart on `clock`: the level's time is the rest.

    Raises:
        _OutOfTime: the ramp's time budget ran out (its release waits not counted).
    """
    from hub_service.pipeline import trust_memory

    grace = ctx.settings.trust_release_grace_s
    began = time.monotonic()
    await trust_memory.wait_sessions(ctx.url, lambda k: k == 0, timeout=grace)
    waited = time.monotonic() - began  # this level's wait for the places of the last one's sessions
    clock.released(waited)
    clients: list[Any] = []
    errors: list[str] = []
    try:
        for i in range(n):
            try:
                client, freed = await clock.within(_open_released(ctx, i), grace)
            except _OutOfTime:
                raise
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {unlinked(str(exc), ctx.url)}")
                return [], errors
            clients.append(client)
            clock.released(freed)
            waited += freed
        clock.release_s = max(clock.release_s, waited)
        results = await clock.within(
            asyncio.gather(*(_exercise(c, i, actions) for i, c in enumerate(clients)), return_exceptions=True)
        )
    finally:
        await _close_all(clients)
    latencies: list[float] = []
    for result in results:
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result  # cancelled: the stage is being stopped
            errors.append(f"{type(result).__name__}: {unlinked(str(result), ctx.url)}")
        else:
            latencies += result
    return latencies, errors


async def _open(ctx: TrustContext, seed: int) -> Any:
    """A session that has reset, waiting while the server says it is full (CAPACITY_REACHED) for
    at most the Hub's `trust_release_grace_s`: sessions closed a moment ago may not be released yet."""
    return (await _open_released(ctx, seed))[0]


async def _open_released(ctx: TrustContext, seed: int) -> tuple[Any, float]:
    """`_open`, with the seconds it waited for the server to free a place."""
    client = session_client(ctx)
    try:
        _, waited = await _reset_released(ctx, client, seed)
    except BaseException:
        await client.close()
        raise
    return client, waited


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)], 3)
