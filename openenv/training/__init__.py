"""Training on OpenEnv servers: a rollout engine, policy adapters, and the TRL integration.

    from openenv.training import RolloutEngine, parse_choice
    engine = RolloutEngine(urls, policy, concurrency=64, parse_action=parse_choice("action", ["hit", "stand"]))
    batch = engine.run_sync(256)

The engine needs only the base install. `TransformersPolicy`, `OpenAIPolicy` and
`openenv_grpo_kwargs` need the `training` extra (`pip install 'openenv-hub[training]'`); every
name loads lazily, so `import openenv.training` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Completion",
    "EpisodeRecord",
    "OpenAIPolicy",
    "PolicyInput",
    "RolloutBatch",
    "RolloutEngine",
    "TokenPrompt",
    "TransformersPolicy",
    "Turn",
    "default_prompt",
    "openenv_grpo_kwargs",
    "parse_choice",
]

_LAZY = {
    "Completion": "openenv.training.records",
    "EpisodeRecord": "openenv.training.records",
    "PolicyInput": "openenv.training.records",
    "RolloutBatch": "openenv.training.records",
    "TokenPrompt": "openenv.training.records",
    "Turn": "openenv.training.records",
    "RolloutEngine": "openenv.training.engine",
    "default_prompt": "openenv.training.engine",
    "parse_choice": "openenv.training.engine",
    "TransformersPolicy": "openenv.training.hf",
    "OpenAIPolicy": "openenv.training.openai_policy",
    "openenv_grpo_kwargs": "openenv.training.trl",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'openenv.training' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("openenv"):
            raise ModuleNotFoundError(
                f"openenv.training.{name} needs the 'training' extra ({exc.name} is missing): "
                "pip install 'openenv-hub[training]'",
                name=exc.name,
            ) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from openenv.training.engine import RolloutEngine, default_prompt, parse_choice
    from openenv.training.hf import TransformersPolicy
    from openenv.training.openai_policy import OpenAIPolicy
    from openenv.training.records import Completion, EpisodeRecord, PolicyInput, RolloutBatch, TokenPrompt, Turn
    from openenv.training.trl import openenv_grpo_kwargs
