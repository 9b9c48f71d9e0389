"""The answer plans of an imported Gymnasium env, when they can be found by playing it: an oracle (a
seed and actions whose episode's last reward is the declared range's top) and canaries (one action
repeated, whose last reward stays at the floor), as RFC 008's semantic level replays them.

The oracle is searched breadth-first over a Discrete action space, on copies of the env
(`copy.deepcopy`), within a time budget; every plan kept is replayed from a fresh env first. Envs
whose actions are not Discrete, that cannot be copied (an emulator), or whose top reward the
search does not reach get no plans, and the folder's README says so.
"""

from __future__ import annotations

import copy
import json
import time
from collections import deque
from typing import Any

__all__ = ["PLAN_SEED", "Plans", "find_plans", "plan_files"]

PLAN_SEED = 1
_BUDGET_S, _MAX_STEPS, _CANARY_STEPS = 5.0, 200, 100

Plans = dict[str, list[int]]  # plan name → actions, all from reset(seed=PLAN_SEED)


def find_plans(make: Any, reward_range: tuple[float, float], margin: float) -> tuple[list[int] | None, Plans]:
    """The oracle's actions (None when none was found) and the canaries, for the env `make()` makes.

    A canary is kept when its last reward is within `margin` of the range's floor and at least
    `margin` below the top (what semantic.canary_floor and semantic.floor_gap ask).
    """
    from gymnasium import spaces

    env = make()
    try:
        space = env.action_space
        if not isinstance(space, spaces.Discrete):
            return None, {}
        actions = [int(space.start) + i for i in range(int(space.n))]
        low, high = reward_range
        oracle = _search(env, actions, high)
        if oracle is None or _last_reward(make, oracle) != high:
            return None, {}
        canaries = {}
        for action in actions:
            plan = _repeat(make, action)
            last = _last_reward(make, plan)
            if last <= low + margin and last <= high - margin:
                canaries[f"canary-always-{action}"] = plan
        return oracle, canaries
    finally:
        env.close()


def plan_files(oracle: list[int], canaries: Plans) -> dict[str, str]:
    """validation/oracle.json and, when there are canaries, validation/canaries.json."""

    def plan(episode_id: str, actions: list[int]) -> dict[str, Any]:
        reset = {"episode_id": episode_id, "seed": PLAN_SEED, "options": {}}
        return {"plan_schema_version": "1", "reset": reset, "actions": [{"action": a} for a in actions]}

    files = {"validation/oracle.json": json.dumps(plan("oracle-searched", oracle), indent=2) + "\n"}
    if canaries:
        listed = [plan(name, actions) for name, actions in canaries.items()]
        files["validation/canaries.json"] = json.dumps({"canaries": listed}, indent=2) + "\n"
    return files


def _search(env: Any, actions: list[int], high: float) -> list[int] | None:
    env.reset(seed=PLAN_SEED)
    try:
        frontier: deque[tuple[Any, list[int]]] = deque([(copy.deepcopy(env), [])])
    except Exception:  # an env holding what cannot be copied (an emulator, a window): no search
        return None
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + _BUDGET_S
    while frontier and time.monotonic() < deadline:
        node, plan = frontier.popleft()
        for action in actions:
            child = copy.deepcopy(node)
            observation, reward, terminated, truncated, _ = child.step(action)
            steps = [*plan, action]
            if float(reward) >= high:
                return steps
            key = (repr(observation), len(steps))  # prunes revisits; the plan found is replayed anyway
            if terminated or truncated or len(steps) >= _MAX_STEPS or key in seen:
                continue
            seen.add(key)
            frontier.append((child, steps))
    return None


def _repeat(make: Any, action: int) -> list[int]:
    env = make()
    try:
        env.reset(seed=PLAN_SEED)
        for n in range(1, _CANARY_STEPS + 1):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                return [action] * n
        return [action] * _CANARY_STEPS
    finally:
        env.close()


def _last_reward(make: Any, plan: list[int]) -> float:
    env = make()
    try:
        env.reset(seed=PLAN_SEED)
        reward = 0.0
        for action in plan:
            _, r, _, _, _ = env.step(action)
            reward = float(r)
        return reward
    finally:
        env.close()
