"""Branching rollouts: GRPO groups that share one mid-episode state (the "fork" extension).

For each group, one session resets with the group's seed and the policy plays `prefix_steps`
turns; the session is then forked into `group_size` children (one round trip: each a session of
its own, in that exact state, RNG included) and the policy plays each child to the end. Only the
decisions after the branch point differ between the group's episodes, so their reward spread is
the decisions' doing, not the deal's.

Each child's `EpisodeRecord` holds the prefix turns and then its own (`extra["branch_turn"]`
says where the branch was, `extra["group"]` which group), so trainers see whole episodes; its
`extra` starts as a deep copy of the prefix's (what a prompt function kept there, such as a
transcript, carries on). Child c of group g is episode `g * group_size + c` from the start, so
a policy that keys its sampling on the episode (`TransformersPolicy`) draws differently in each
child; the prefix is played as episode `g * group_size`. A group whose server cannot fork (no
extension, capacity) raises: branching is asked for explicitly, and a silent fallback to plain
episodes would change what is being measured.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from openenv.errors import ConfigurationError, EnvExecutionError, InvalidActionError
from openenv.training._engine_view import EngineView
from openenv.training.records import EpisodeRecord, PolicyInput, RolloutBatch, Turn

if TYPE_CHECKING:
    from openenv.client.base import EnvClient

__all__ = ["run_branched"]


async def run_branched(
    engine: EngineView,
    groups: int,
    group_size: int,
    *,
    prefix_steps: int | Sequence[int] = 0,
    base_seed: int = 0,
    seeds: Sequence[int] | None = None,
) -> RolloutBatch:
    """`groups` × `group_size` episodes: group g resets with seed `base_seed + g` (or `seeds[g]`),
    plays `prefix_steps` turns (or `prefix_steps[g]`), and branches into `group_size` children.
    Records are in group order.

    Raises:
        ConfigurationError: a count is out of range, or a per-group list has the wrong length.
        SnapshotError, CapacityReachedError: the server cannot fork (see the module docstring).
    """
    prefixes = [prefix_steps] * groups if isinstance(prefix_steps, int) else list(prefix_steps)
    group_seeds = [base_seed + g for g in range(groups)] if seeds is None else list(seeds)
    if groups < 1 or group_size < 1 or any(not isinstance(k, int) or k < 0 for k in prefixes):
        raise ConfigurationError("groups and group_size must be >= 1, prefix_steps >= 0")
    if len(prefixes) != groups or len(group_seeds) != groups:
        raise ConfigurationError(
            f"prefix_steps and seeds, when lists, take one value per group: {groups} groups, "
            f"{len(prefixes)} prefix_steps, {len(group_seeds)} seeds"
        )
    start = time.perf_counter()
    gate = asyncio.Semaphore(max(1, engine.concurrency // group_size))
    options = dict(engine.reset_kwargs)

    async def one(g: int) -> list[EpisodeRecord]:
        async with gate:
            url = engine.urls[g % len(engine.urls)]
            return await _group(engine, url, g, group_seeds[g], group_size, prefixes[g], options)

    per_group = await asyncio.gather(*(one(g) for g in range(groups)))
    records = [r for group in per_group for r in group]
    for i, record in enumerate(records):
        record.index = i
    return RolloutBatch(records, time.perf_counter() - start)


async def _group(
    engine: EngineView, url: str, g: int, seed: int, n: int, prefix_steps: int, options: dict[str, Any]
) -> list[EpisodeRecord]:
    parent = engine.client_cls(url, **engine.client_options)
    try:
        trunk = EpisodeRecord(index=g * n, seed=seed)
        trunk.url = url
        result = await parent.reset(seed=seed, **options)
        for turn in range(prefix_steps):
            if result.done:
                break
            result = await _turn(engine, parent, trunk, result, turn)
        children = await parent.fork(n) if not result.done else []

        def branch(c: int) -> EpisodeRecord:
            extra = {**copy.deepcopy(trunk.extra), "group": g, "branch_turn": len(trunk.turns)}
            return dataclasses.replace(
                trunk,
                index=g * n + c,
                turns=list(trunk.turns),
                reward_components=dict(trunk.reward_components),
                errors=list(trunk.errors),
                extra=extra,
                attempts=1,
            )

        records = [branch(c) for c in range(n)]
        await asyncio.gather(*(_finish(engine, c, r, result) for c, r in zip(children, records, strict=False)))
        if not children:  # the prefix ended the episode: the group is that one episode, n times
            for record in records:
                record.status = "done"
                record.final_observation = result.observation
        return records
    finally:
        await parent.close()


async def _finish(engine: EngineView, client: EnvClient[Any, Any, Any], record: EpisodeRecord, result: Any) -> None:
    t0 = time.perf_counter()
    try:
        turn = len(record.turns)
        while not result.done:
            if turn >= engine.max_turns:
                record.status = "truncated"
                break
            result = await _turn(engine, client, record, result, turn)
            turn += 1
        else:
            record.status = "done"
    except (InvalidActionError, EnvExecutionError) as exc:
        record.status = "error"
        record.errors.append(str(exc))
    finally:
        record.final_observation = result.observation
        record.duration_s = time.perf_counter() - t0


async def _turn(
    engine: EngineView, client: EnvClient[Any, Any, Any], record: EpisodeRecord, result: Any, turn: int
) -> Any:
    observation = result.observation
    prompt = engine.prompt(observation, record)
    t0 = time.perf_counter()
    out = engine.policy(PolicyInput(prompt, observation, record.index, record.seed, turn, record.attempts))
    if inspect.isawaitable(out):
        out = await out
    t1 = time.perf_counter()
    completion, action = engine._action_of(out, observation)
    result = await client.step(action)
    t2 = time.perf_counter()
    if result.reward is not None:
        record.total_reward += result.reward
    record.turns.append(
        Turn(
            prompt,
            completion.text if completion is not None else None,
            action.model_dump(exclude={"metadata"}) if isinstance(action, BaseModel) else action,
            result.reward,
            result.done,
            None,
            t1 - t0,
            t2 - t1,
            completion.token_ids if completion is not None else None,
            completion.logprobs if completion is not None else None,
        )
    )
    return result
