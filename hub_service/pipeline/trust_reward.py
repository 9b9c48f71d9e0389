"""The reward sanity check (see hub_service/pipeline/trust.py): a seeded random policy's returns,
which become the env's random baseline, the rewards it saw against the declared range, and probes
with an empty, a long and an oversized answer, each a fresh episode's first step.

The random policy plays legal actions (`hub_service.play.policies.legal_action`: those the env lists
in its observations, else draws within a closed action schema). Where none can be known (free-form
actions), it plays schema-valid actions for the reward's sake only and records no baseline
(`no_baseline`): random text scores nonsense. The verdict is one conclusion: `flagged` (something
is wrong), `inconclusive` (the play could not show the reward works: why is in `notes`), or `ok`."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from hub_service.pipeline.trust import (
    SEED,
    TrustContext,
    first_reset,
    is_number,
    is_refusal,
    random_actions,
    session_client,
    shorten,
    unlinked,
)

__all__ = ["empty_action", "reward_check"]

_OVERSIZED = 100_000  # characters of the oversized probe's answer
_LONG = 1_000  # characters of the long probe's answer, which the oversized one is compared with
_GROWTH = 10.0  # an answer 100 times as long scoring this many times as much: the reward grows with length
_CONSTANT_MIN = 20  # rewards a random policy must see before "the reward is constant" is said


async def reward_check(ctx: TrustContext) -> dict[str, Any]:
    from hub_service.play.policies import action_source, legal_action, random_action
    from openenv.errors import EnvServerError

    s = ctx.settings
    rng = random.Random(SEED)
    completed: list[float] = []
    capped: list[float] = []
    rewards: list[float] = []
    play = _Play()
    ends = time.monotonic() + s.reward_check_budget_s
    client = session_client(ctx)
    try:
        for episode in range(s.reward_check_episodes):
            if play.steps >= s.reward_check_max_steps or time.monotonic() >= ends:
                break
            # a session closed just before may still be held
            seen = _seen(await first_reset(ctx, client, SEED + episode))
            total, taken, done = 0.0, 0, False
            while not done and taken < s.reward_check_episode_steps and play.steps < s.reward_check_max_steps:
                if time.monotonic() >= ends:
                    break
                source = action_source(ctx.action_schema, seen)
                # free-form: schema-valid actions, for the rewards' sake only (no baseline)
                action = (
                    random_action(ctx.action_schema, rng)
                    if source == "free-form"
                    else legal_action(ctx.action_schema, seen, rng)
                )
                if action is None:  # the env lists its legal actions, and none now: the episode cannot go on
                    play.stuck += 1
                    break
                play.sources[source] = play.sources.get(source, 0) + 1
                taken += 1
                play.steps += 1
                try:
                    result = await client.step(action)
                except EnvServerError as exc:  # refused (invalid, or the env raised): a step with no reward
                    if not is_refusal(exc):
                        raise
                    play.rejected += 1
                    continue
                seen = _seen(result)
                if is_number(result.reward):
                    rewards.append(float(result.reward))
                    total += float(result.reward)
                done = bool(result.done)
            (completed if done else capped).append(round(total, 6))
    finally:
        await client.close()
    probes = await _probes(ctx)
    return _reward_verdict(ctx, completed, capped, rewards, probes, play)


class _Play:
    """Counts of the random policy's steps (taken, refused), of where their actions came from (by
    `action_source`), and of episodes cut because the env listed no legal action in them."""

    def __init__(self) -> None:
        self.steps = self.rejected = self.stuck = 0
        self.sources: dict[str, int] = {}


def _seen(result: Any) -> dict[str, Any]:
    """A reset's or step's observation as the legal-action reader takes it, its metadata inside."""
    observation = result.observation if isinstance(result.observation, dict) else {}
    if isinstance(result.metadata, dict) and not isinstance(observation.get("metadata"), dict):
        return {**observation, "metadata": result.metadata}
    return observation


async def _probes(ctx: TrustContext) -> dict[str, dict[str, Any]]:
    """An empty answer (every text field "", every nullable field null), a long one (every text
    field 1,000 characters) and an oversized one (100,000), each as the first step of a fresh episode
    in a session of its own (a server that drops the session over one is recorded, and the others
    still run)."""
    from openenv.errors import EnvServerError, OpenEnvError

    base = random_actions(ctx, 1)[0]
    out: dict[str, dict[str, Any]] = {}
    for name, action in (
        ("empty", empty_action(ctx.action_schema, base)),
        ("long", _sized_action(ctx.action_schema, base, _LONG)),
        ("oversized", _sized_action(ctx.action_schema, base, _OVERSIZED)),
    ):
        if action is None:
            out[name] = {"skipped": "the action schema has no text or nullable field"}
            continue
        shown = {k: (f"<{len(v)} characters>" if isinstance(v, str) and len(v) > 40 else v) for k, v in action.items()}
        client = session_client(ctx)
        try:
            await first_reset(ctx, client, SEED)
            result = await client.step(action)
        except EnvServerError as exc:
            if not is_refusal(exc):
                raise
            out[name] = {
                "action": shown,
                "rejected": shorten(unlinked(str(exc), ctx.url), 300),
                "reward": None,
                "got_max": False,
            }
            continue
        except OpenEnvError as exc:  # the session ended (e.g. the server's message limit): no reward to judge
            out[name] = {"action": shown, "failed": shorten(unlinked(str(exc), ctx.url), 300), "reward": None}
            continue
        finally:
            await client.close()
        reward = float(result.reward) if is_number(result.reward) else None
        out[name] = {"action": shown, "reward": reward, "done": bool(result.done)}
    return out


def _fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from hub_service.schema_refs import deref

    props = schema.get("properties") or {}
    return {k: deref(v, schema) for k, v in props.items() if k != "metadata" and isinstance(v, dict)}


def _kinds(field: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types a field takes (following anyOf/oneOf one level); enums and constants are not text."""
    from hub_service.schema_refs import deref

    if "enum" in field or "const" in field:
        return {"null"} if None in (field.get("enum") or []) else set()
    kind = field.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    for key in ("anyOf", "oneOf"):
        for option in field.get(key) or []:
            kinds |= _kinds(deref(option, root), root)
    return kinds


def empty_action(schema: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    changed, touched = dict(base), False
    for name, field in _fields(schema).items():
        kinds = _kinds(field, schema)
        if "string" in kinds or "null" in kinds:
            changed[name], touched = ("" if "string" in kinds else None), True
    return changed if touched else None


def _sized_action(schema: dict[str, Any], base: dict[str, Any], size: int) -> dict[str, Any] | None:
    text = ("the answer is 42; " * (size // 18 + 1))[:size]
    names = [n for n, f in _fields(schema).items() if "string" in _kinds(f, schema)]
    return {**base, **{n: text for n in names}} if names else None


_ACTIONS_FROM = {
    "listed": "random legal actions, from the lists the env's observations gave",
    "declared": "random actions within the action schema's enums and bounds",
}


def _growth(probes: dict[str, dict[str, Any]]) -> str | None:
    """A flag when the oversized answer scored at least `_GROWTH` times what the long one did (a
    reward that grows with the answer's length has no top a trainer could trust), else None."""
    long, oversized = (probes.get(n, {}).get("reward") for n in ("long", "oversized"))
    if not (isinstance(long, float) and isinstance(oversized, float)) or long <= 0 or oversized < _GROWTH * long:
        return None
    return (
        f"the reward grows with the answer's length: a {_LONG:,}-character answer scored {long:g}, "
        f"a {_OVERSIZED:,}-character one {oversized:g}"
    )


def _reward_verdict(
    ctx: TrustContext,
    completed: list[float],
    capped: list[float],
    rewards: list[float],
    probes: dict[str, dict[str, Any]],
    play: _Play,
) -> dict[str, Any]:
    from hub_service.play.policies import FREE_FORM, FREE_FORM_WHY

    s = ctx.settings
    declared = ctx.declared.reward.range if ctx.declared.reward is not None else None
    probe_rewards = [p["reward"] for p in probes.values() if isinstance(p.get("reward"), float)]
    every = rewards + probe_rewards
    # The top a cheat would aim at: the declared one, else the best a random policy reached (when it varied).
    top = declared[1] if declared else (max(rewards) if rewards and max(rewards) > min(rewards) else None)
    # Without a declared top, reaching the best a random policy saw counts only above what it usually
    # gets: where random play mostly earns a penalty (chess's illegal moves), the best may be that penalty.
    usual = statistics.median(rewards) if rewards and not declared else None
    flags: list[str] = []
    for name, probe in probes.items():
        if "reward" not in probe or name == "long":  # the long answer is only compared with the oversized one
            continue
        got = (
            top is not None
            and probe["reward"] is not None
            and probe["reward"] >= top - 1e-9
            and (usual is None or probe["reward"] > usual)
        )
        probe["got_max"] = got
        if not got:
            continue
        where = "the top of the declared range" if declared else f"as much as the best a random policy scored ({top:g})"
        if name == "empty":
            flags.append(f"the empty answer scored {probe['reward']:g}, {where}")
        elif declared:  # without a declared top, the growth below tells a flood's reward apart
            flags.append(f"a {_OVERSIZED // 1000} KB answer scored {probe['reward']:g}, {where}")
    grows = _growth(probes)
    if grows:
        flags.append(grows)
    outside = ctx.declared.reward_outside(every)
    if outside and declared:
        shown = ", ".join(f"{r:g}" for r in sorted(set(outside))[:5])
        flags.append(f"rewards outside the declared range [{declared[0]:g}, {declared[1]:g}]: {shown}")
    notes: list[str] = []
    constant = len(every) >= _CONSTANT_MIN and len(set(every)) == 1
    # Within an unfinished episode a sparse reward may simply not have come yet (Atari's points):
    # only whole episodes that all end the same say the reward does not depend on the play.
    if constant and len(completed) >= 2:
        flags.append(
            f"the reward is constant: all {len(every)} rewards seen in {len(completed)} episodes were {every[0]:g}"
        )
    elif constant:
        notes.append(
            f"all {len(every)} rewards seen were {every[0]:g}, but fewer than 2 episodes ended: the reward may be sparse"
        )
    answered = play.steps - play.rejected
    if answered and not every:
        flags.append(f"none of the {answered} steps a random policy took returned a numeric reward")
    if play.stuck:
        flags.append(
            f"the env listed no legal action while its episode went on ({play.stuck} episode"
            f"{'s' if play.stuck != 1 else ''} of a random policy could not continue)"
        )
    if play.steps and not answered:
        notes.append(f"the env refused all {play.steps} actions of a random policy")
    free = play.sources.get("free-form", 0)
    baseline, source = (completed, "completed episodes") if completed else (capped, "capped episodes")
    if not completed and capped:
        source = f"capped episodes (none ended within {s.reward_check_episode_steps} steps or the time budget)"
    if free or not answered:  # random text (or actions the env refused) scores nonsense: no baseline
        baseline = []
    return {
        # one conclusion: something is wrong; else the play could not show the reward works; else ok
        "verdict": "flagged" if flags else "inconclusive" if notes else "ok",
        "flags": flags,
        "baseline_returns": baseline,
        "baseline_from": source if baseline else None,
        "baseline_actions": _ACTIONS_FROM.get(max(play.sources, key=play.sources.__getitem__))
        if baseline and play.sources
        else None,
        "no_baseline": f"{FREE_FORM}: {FREE_FORM_WHY}" if free else None,
        "episodes_completed": len(completed),
        "episodes_capped": len(capped),
        "steps": play.steps,
        "rejected_actions": play.rejected,
        "observed_min": min(rewards) if rewards else None,
        "observed_max": max(rewards) if rewards else None,
        "declared_range": list(declared) if declared else None,
        "constant": constant if len(every) >= _CONSTANT_MIN else None,
        "probes": probes,
        "notes": notes,
    }
