"""The fork check (a trust signal beside determinism): for an env that announces the "fork"
protocol extension, a snapshot taken mid-episode must give the same future every time.

One session resets with the check's seed and plays a few seeded random actions (the snapshot is
taken at the last state before the episode ended); from that snapshot the same actions are
played three times: after a restore, after a second restore, and in a forked child. Identical
observations, rewards and done flags earn the "forkable" badge; otherwise the first difference is
reported (its step, field and both values, and which replay it was), as the determinism check
does. Fields the env declares as varying (`validation.varying_fields`) are left out of the
comparison, as there. An env that does not announce "fork" is `{"verdict": "not_offered"}`.
"""

from __future__ import annotations

from typing import Any

from hub_service.pipeline.trust import (
    SEED,
    TrustContext,
    _differing_fields,
    _first_difference,
    _outcome,
    _without,
    first_reset,
    random_actions,
    session_client,
    unlinked,
)

__all__ = ["PREFIX_STEPS", "fork_check"]

PREFIX_STEPS = 4  # random actions played before the snapshot (fewer when the episode ends sooner)


async def fork_check(ctx: TrustContext) -> dict[str, Any]:
    client = session_client(ctx, plain=True)  # fork is a /ws extension
    try:
        await client.connect()
        if "fork" not in client.server_extensions:
            return {"verdict": "not_offered", "reason": "the server does not announce the fork extension"}
        await first_reset(ctx, client, SEED)
        snap = await client.snapshot()
        prefix = 0
        for action in random_actions(ctx, PREFIX_STEPS, seed=SEED + 1):
            result = await _step(client, action, ctx.url)
            if result.get("done"):
                break
            await client.release(snap)
            snap = await client.snapshot()
            prefix += 1
        actions = random_actions(ctx, ctx.settings.determinism_steps, seed=SEED + 2)
        varying = list(ctx.declared.varying_fields)
        plays: dict[str, list[dict[str, Any]]] = {}
        for name in ("first restore", "second restore"):
            await client.restore(snap)
            plays[name] = [_without(o, varying) for o in await _play(client, actions, ctx.url)]
        (child,) = await client.fork(1, snapshot=snap)
        plays["forked child"] = [_without(o, varying) for o in await _play(child, actions, ctx.url)]
        first = plays["first restore"]
        out: dict[str, Any] = {"seed": SEED, "prefix_steps": prefix, "steps": len(first), "first_difference": None}
        if varying:
            out["ignored_fields"] = varying
        for name in ("second restore", "forked child"):
            diff = _first_difference(first, plays[name])
            if diff is not None:
                out["first_difference"] = {**diff, "replay": name}
                out["differing_fields"] = _differing_fields(first, plays[name])
                break
        out["verdict"] = "not_forkable" if out["first_difference"] else "forkable"
        return out
    finally:
        await client.close()


async def _step(client: Any, action: dict[str, Any], url: str) -> dict[str, Any]:
    from openenv.errors import EnvExecutionError

    try:
        return _outcome(await client.step(action))
    except EnvExecutionError as exc:  # an action the env refuses is an outcome too
        return {"error": unlinked(str(exc), url)}


async def _play(client: Any, actions: list[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    outcomes = []
    for action in actions:
        outcome = await _step(client, action, url)
        outcomes.append(outcome)
        if outcome.get("done"):
            break
    return outcomes
