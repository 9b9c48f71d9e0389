"""`openenv import ID` for a Gymnasium id, first half: look at the env (make it, map its spaces, play a
few random steps) for what its folder declares (`_gym_files.py` writes the folder).

Every way the id can be bad (not registered, its package missing, making it failing, a space with
no JSON form, a package no distribution provides) is a `CliError` with exit code 2, raised before
anything is written.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import time
from dataclasses import dataclass
from typing import Any

from openenv.cli._gym_plans import find_plans
from openenv.cli._output import CliError

__all__ = ["FLOOR_MARGIN", "GymSource", "inspect_id"]

_INSTALL_HINT = "install it: pip install 'openenv-hub[gymnasium]' (or bash scripts/bootstrap in a checkout)"
# Gymnasium's extras that bring what its own envs import (pygame for their pictures, Box2D, MuJoCo).
_GYMNASIUM_EXTRAS = {
    "gymnasium.envs.classic_control": "classic-control",
    "gymnasium.envs.toy_text": "toy-text",
    "gymnasium.envs.box2d": "box2d",
    "gymnasium.envs.mujoco": "mujoco",
}
_PROBE_EPISODES, _PROBE_STEPS, _PROBE_BUDGET_S = 3, 200, 5.0
FLOOR_MARGIN = 1.0  # openenv.yaml's floor_margin: a canary's last reward this far below the oracle's


@dataclass(frozen=True)
class GymSource:
    """What `inspect_id` learned of an id."""

    env_id: str  # as given (`module:Id` keeps its module)
    entry_point: str
    version: str  # gymnasium's
    requirements: list[str]
    render: bool
    reward_range: tuple[float, float]
    max_episode_steps: int | None
    observation_space: Any
    action_space: Any
    action_meanings: list[str] | None
    first_observation: Any
    first_info: dict[str, Any]
    sample_action: Any
    oracle: list[int] | None  # actions from reset(seed=PLAN_SEED) (openenv.cli._gym_plans)
    canaries: dict[str, list[int]]


def inspect_id(env_id: str) -> GymSource:
    """Make `env_id`'s env, check its spaces map, and measure what the folder declares.

    Raises:
        CliError: exit 2 for every kind of bad id (the message names what was found).
    """
    try:
        import gymnasium
    except ImportError:
        raise CliError("gymnasium is not installed, so Gymnasium ids cannot be imported", _INSTALL_HINT, 2) from None
    from openenv.errors import ConfigurationError
    from openenv.interop.gymnasium import check_space, load_spec

    try:
        spec = load_spec(env_id)
    except gymnasium.error.Error as exc:
        raise CliError(
            f"{env_id!r} is neither a folder nor a .py file, and Gymnasium cannot make it: {exc}",
            "give a path to a Verifiers or ORS source, or an id from `python -c 'import gymnasium; gymnasium.pprint_registry()'`",
            2,
        ) from None
    except ImportError as exc:
        raise CliError(
            f"importing the package that registers {env_id} failed: {exc}", "install that package", 2
        ) from None
    name = env_id.rpartition(":")[2]
    modes = spec.kwargs.get("render_modes") or []
    try:
        env = gymnasium.make(name)
        modes = env.metadata.get("render_modes") or modes
        if "rgb_array" in modes:
            env.close()
            env = gymnasium.make(name, render_mode="rgb_array")
    except Exception as exc:  # the env's own code: whatever it raises is bad input, named
        raise CliError(
            f"making {env_id} ({_entry_point(spec)}) failed: {type(exc).__name__}: {exc}",
            "install what it needs, or pick another id",
            2,
        ) from None
    try:
        try:
            check_space(env.observation_space, "observation")
            check_space(env.action_space, "action")
        except ConfigurationError as exc:
            raise CliError(
                f"{env_id} cannot be served: {exc}", "only ids whose spaces map can be imported", 2
            ) from None
        return _probe(env_id, spec, env, render="rgb_array" in modes)
    finally:
        env.close()


def _entry_point(spec: Any) -> str:
    entry = spec.entry_point
    return entry if isinstance(entry, str) else f"{entry.__module__}:{getattr(entry, '__qualname__', entry)}"


def _probe(env_id: str, spec: Any, env: Any, *, render: bool) -> GymSource:
    """Reset with seed 0, take a picture, play random steps for the reward range, search the plans."""
    import gymnasium

    try:
        first, info = env.reset(seed=0)
        if render:
            frame = env.render()
            render = getattr(frame, "dtype", None) is not None and getattr(frame, "ndim", 0) in (2, 3)
        env.action_space.seed(0)
        sample = env.action_space.sample()
        rewards = _random_rewards(env)
        low, high = math.floor(min(rewards, default=0.0)), math.ceil(max(rewards, default=1.0))
        if low == high:  # a constant reward: declare [0, r] or [r, 0] (or [0, 1])
            low, high = min(low, 0), max(high, 0) if high != 0 else 1
        name = env_id.rpartition(":")[2]
        oracle, canaries = find_plans(lambda: gymnasium.make(name), (float(low), float(high)), FLOOR_MARGIN)
    except Exception as exc:  # the env's own code failing on its first episodes
        raise CliError(f"{env_id} failed on its first episode: {type(exc).__name__}: {exc}", None, 2) from None
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    return GymSource(
        env_id=env_id,
        entry_point=_entry_point(spec),
        version=importlib.metadata.version("gymnasium"),
        requirements=_requirements(env_id, _entry_point(spec)),
        render=render,
        reward_range=(float(low), float(high)),
        max_episode_steps=spec.max_episode_steps,
        observation_space=env.observation_space,
        action_space=env.action_space,
        action_meanings=list(meanings()) if callable(meanings) else None,
        first_observation=first,
        first_info=info,
        sample_action=sample,
        oracle=oracle,
        canaries=canaries,
    )


def _random_rewards(env: Any) -> list[float]:
    rewards: list[float] = []
    deadline = time.monotonic() + _PROBE_BUDGET_S
    for episode in range(_PROBE_EPISODES):
        env.reset(seed=episode)
        for _ in range(_PROBE_STEPS):
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            rewards.append(float(reward))
            if terminated or truncated or time.monotonic() > deadline:
                break
    return [r for r in rewards if math.isfinite(r)]


def _requirements(env_id: str, entry_point: str) -> list[str]:
    """Pinned requirements: gymnasium (with the extra its own env needs) and the distribution of
    every other package the id comes from, at the versions installed here.

    Raises:
        CliError: a package no installed distribution provides (the image could not install it).
    """
    version = importlib.metadata.version("gymnasium")
    module = entry_point.split(":")[0]
    extra = next((x for prefix, x in _GYMNASIUM_EXTRAS.items() if module.startswith(prefix)), None)
    found = [f"gymnasium[{extra}]=={version}" if extra else f"gymnasium=={version}"]
    roots = {module.split(".")[0]}
    if ":" in env_id:
        roots.add(env_id.split(":")[0].split(".")[0])
    from openenv.interop.gymnasium import NAMESPACE_MODULES

    if "/" in env_id:
        namespace = env_id.rpartition(":")[2].split("/")[0]
        roots.update({NAMESPACE_MODULES[namespace]} if namespace in NAMESPACE_MODULES else set())
    providers = importlib.metadata.packages_distributions()
    for root in sorted(roots - {"gymnasium"}):
        dists = _providing(root, providers.get(root) or [])
        if not dists:
            raise CliError(
                f"{env_id} comes from the module {root!r}, which no installed distribution provides, "
                "so the env's image could not install it",
                "package it (pip install it here from a registry or a wheel), then import again",
                2,
            )
        found.append(f"{dists[0]}=={importlib.metadata.version(dists[0])}")
    return found


def _providing(root: str, dists: list[str]) -> list[str]:
    """Those of `dists` (the distributions that claim the top-level name `root`) whose files hold the
    module Python imports as `root`: a distribution that ships a same-named package elsewhere (cint
    ships a top-level `tests`) does not provide a checkout's own. All of them when the module's file
    is unknown."""
    spec = importlib.util.find_spec(root)
    origin = spec.origin if spec is not None else None
    if not origin or not dists:
        return dists
    from pathlib import Path

    where = Path(origin).resolve()
    found = []
    for name in dists:
        dist = importlib.metadata.distribution(name)
        if any(Path(str(dist.locate_file(f))).resolve() == where for f in dist.files or []):
            found.append(name)
    return found
