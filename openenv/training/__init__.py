"""Training on OpenEnv servers: a rollout engine, policy adapters, and the TRL integration.

    from openenv.training import RolloutEngine, parse_choice
    engine = RolloutEngine(urls, policy, concurrency=64, parse_action=parse_choice("action", ["hit", "stand"]))
    batch = engine.run_sync(256)

The engine needs only the base install. `TransformersPolicy`, `OpenAIPolicy` and
`openenv_grpo_kwargs` need the `training` extra (`pip install 'openenv-hub[training]'`); every
name loads lazily, so `import openenv.training` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv._lazy import lazy_attributes

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


# A third-party module missing behind any of these names is one the `training` extra installs.
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY, extras=dict.fromkeys(_LAZY.values(), "training"))

if TYPE_CHECKING:
    from openenv.training.engine import RolloutEngine, default_prompt, parse_choice
    from openenv.training.hf import TransformersPolicy
    from openenv.training.openai_policy import OpenAIPolicy
    from openenv.training.records import Completion, EpisodeRecord, PolicyInput, RolloutBatch, TokenPrompt, Turn
    from openenv.training.trl import openenv_grpo_kwargs
