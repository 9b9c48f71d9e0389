"""Running the trust checks at the end of the smoke stage, each bounded in time and failing
softly: a check that cannot run is `{"verdict": "unchecked", "reason": ...}`, never a failed smoke
test. The checks themselves: hub_service/pipeline/trust.py and trust_reward.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hub_service.pipeline.trust import TrustContext, capacity_check, determinism_check, shorten, unlinked
from hub_service.pipeline.trust_reward import reward_check

__all__ = ["run_checks"]

_GRACE_S = 5.0  # how long a check stopped at its limit may take to close its sessions


async def run_checks(ctx: TrustContext) -> dict[str, dict[str, Any]]:
    """Run the three checks in turn; returns {"determinism", "reward_check", "capacity"} → its dict.

    The capacity ramp runs last: it is the one most likely to leave a weak server worse off."""
    s = ctx.settings
    checks: list[tuple[str, bool, str, Callable[[TrustContext], Awaitable[dict[str, Any]]]]] = [
        ("determinism", s.determinism_check, "OPENENV_HUB_DETERMINISM_CHECK", determinism_check),
        ("reward_check", s.reward_check, "OPENENV_HUB_REWARD_CHECK", reward_check),
        ("capacity", s.capacity_check, "OPENENV_HUB_CAPACITY_CHECK", capacity_check),
    ]
    out: dict[str, dict[str, Any]] = {}
    for name, enabled, setting, check in checks:
        start = time.monotonic()
        result: dict[str, Any]
        if not enabled:
            result = {"verdict": "unchecked", "reason": f"turned off by the Hub's settings ({setting})"}
        else:
            result = await _softly(check, ctx, s.trust_check_timeout_s)
        result["seconds"] = round(time.monotonic() - start, 3)
        ctx.log(f"trust check {name}: {_summary(name, result)} ({result['seconds']:.2f}s)")
        out[name] = result
    out["determinism"]["fork"] = await _fork(ctx)
    return out


async def _fork(ctx: TrustContext) -> dict[str, Any]:
    """The fork check (hub_service/pipeline/trust_fork.py), under the determinism check's switch;
    kept inside the determinism record (`determinism.fork`), whose question it asks of a snapshot."""
    from hub_service.pipeline.trust_fork import fork_check

    s = ctx.settings
    start = time.monotonic()
    result: dict[str, Any]
    if not s.determinism_check:
        result = {"verdict": "unchecked", "reason": "turned off by the Hub's settings (OPENENV_HUB_DETERMINISM_CHECK)"}
    else:
        result = await _softly(fork_check, ctx, s.trust_check_timeout_s)
    result["seconds"] = round(time.monotonic() - start, 3)
    diff = result.get("first_difference")
    where = f", first difference at step {diff['step']} in {diff['field']} ({diff['replay']})" if diff else ""
    ctx.log(f"trust check fork: {result['verdict']}{where} ({result['seconds']:.2f}s)")
    return result


async def _softly(
    check: Callable[[TrustContext], Awaitable[dict[str, Any]]], ctx: TrustContext, limit: float
) -> dict[str, Any]:
    from openenv.errors import OpenEnvError

    # Not asyncio.wait_for: a cancellation that lands while the client is mid-handshake can be
    # swallowed there, and the check would run on past its limit and be taken as finished.
    task = asyncio.ensure_future(check(ctx))
    try:
        finished, _ = await asyncio.wait({task}, timeout=limit)
    except asyncio.CancelledError:  # the stage is being stopped: the check goes with it
        task.cancel()
        raise
    if not finished:
        task.cancel()
        await asyncio.wait({task}, timeout=_GRACE_S)  # let its sessions close; a stuck one goes with the server
        if task.done() and not task.cancelled():
            task.exception()  # retrieved, so that asyncio does not report it as lost
        return {
            "verdict": "unchecked",
            "reason": f"did not finish within {limit:g}s (OPENENV_HUB_TRUST_CHECK_TIMEOUT_S)",
        }
    try:
        return task.result()
    except OpenEnvError as exc:  # the server failed the check's calls: not a verdict on the env
        return {"verdict": "unchecked", "reason": f"could not run: {shorten(unlinked(str(exc), ctx.url), 500)}"}
    except Exception as exc:  # a check is extra information: whatever breaks it, the smoke verdict stands
        return {"verdict": "unchecked", "reason": f"could not run: {type(exc).__name__}: {shorten(str(exc), 500)}"}


def _summary(name: str, result: dict[str, Any]) -> str:
    if result.get("verdict") == "unchecked":
        return f"unchecked: {result.get('reason')}"
    if name == "capacity":
        return (
            (
                f"held {result['sessions_held']} sessions"
                if result.get("sessions_held") is not None
                else "capacity unmeasured"
            )
            + f" ({result.get('stopped_because')}), a closed one's place "
            f"freed within {result.get('release_s')}s; server "
            f"{result.get('server_base_mb')} MB, {result.get('idle_session_mb')} MB per idle session, "
            f"{result.get('active_session_mb')} MB per active session"
            + "".join(f"; {flag}" for flag in result.get("flags") or [])
        )
    if name == "determinism":
        diff = result.get("first_difference")
        return f"{result['verdict']}" + (
            f", first difference at step {diff['step']} in {diff['field']}" if diff else ""
        )
    flags = result.get("flags") or result.get("notes") or []  # an inconclusive check's notes say why
    baseline = result.get("baseline_returns") or ("none (free-form actions)" if result.get("no_baseline") else None)
    return f"{result['verdict']}" + (": " + "; ".join(flags) if flags else "") + f", baseline {baseline}"
