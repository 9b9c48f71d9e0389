"""ART integration: rollouts from the OpenEnv rollout engine as ART's trajectory groups.

    import art
    from openenv.training import OpenAIPolicy, RolloutEngine, parse_choice
    from openenv.training.art import gather_trajectory_groups

    model = art.TrainableModel(name="agent-001", project="blackjack", base_model="Qwen/Qwen2.5-1.5B-Instruct")
    await model.register(backend)                       # ART's backend serves the model over OpenAI's API
    policy = OpenAIPolicy(model.inference_base_url, model=model.name, api_key=model.inference_api_key)
    engine = RolloutEngine(urls, policy, parse_action=parse_choice("action", ["hit", "stand"]), max_turns=6)
    groups = await gather_trajectory_groups(engine, groups=8, group_size=4)
    await model.train(groups)

The engine plays the episodes (concurrent sessions, retries on other servers); each group's
episodes share a seed, so GRPO-style advantages compare answers to the same situation. Each
episode becomes one `art.Trajectory`: the env's observations as user messages; the model's answers
as assistant `Choice`s with their tokens' log-probabilities when the policy gave them (ART's usual
training reads those), else as plain assistant messages (which ART trains on with
`allow_training_without_logprobs`); an action the policy returned without text as an assistant
message holding its JSON; the episode's total reward as its `reward`, its reward components and
turn count as `metrics`, and its seed, status and server as `metadata`. An episode that failed (its
server lost every try) or raised in the env is an exception of its group, as ART records them.

Needs the `art` extra (`pip install 'openenv-hub[art]'`: `openpipe-art`, without its GPU backends).
"""

from __future__ import annotations

import json
from typing import Any

import art
from openai.types.chat.chat_completion import Choice, ChoiceLogprobs
from openai.types.chat.chat_completion_message import ChatCompletionMessage
from openai.types.chat.chat_completion_token_logprob import ChatCompletionTokenLogprob

from openenv.errors import ConfigurationError
from openenv.training.engine import RolloutEngine
from openenv.training.records import EpisodeRecord, RolloutBatch, TokenPrompt

__all__ = ["EpisodeFailed", "gather_trajectory_groups", "to_trajectory", "trajectory_groups"]


def _undo_arts_unfitting_transformers_patch() -> None:
    """`import art` replaces a private function of transformers (`masking_utils`) with one written
    for older versions; on transformers 5 it breaks every `generate` in the process (a
    `TransformersPolicy` included). Put the original back when the two do not take the same
    arguments (by name, in order); keep ART's where it fits."""
    import inspect

    try:
        from art.transformers import patches
        from transformers import masking_utils
    except ImportError:  # no transformers: nothing was patched
        return
    name = "_preprocess_mask_arguments"
    current: Any = getattr(masking_utils, name)
    patched: Any = patches._patched_preprocess_mask_arguments
    original: Any = getattr(patches, name)
    if current is patched and list(inspect.signature(patched).parameters) != list(
        inspect.signature(original).parameters
    ):
        setattr(masking_utils, name, original)


_undo_arts_unfitting_transformers_patch()


class EpisodeFailed(RuntimeError):
    """An episode with no trajectory to train on (status `failed` or `error`); the message says why."""


def to_trajectory(record: EpisodeRecord, system_prompt: str | None = None) -> art.Trajectory:
    """One played episode as an `art.Trajectory` (see the module's docstring for what goes where)."""
    messages: list[Any] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for turn in record.turns:
        messages.extend(_prompt_messages(turn.prompt, len(messages) - (1 if system_prompt else 0)))
        ids, logprobs = turn.completion_ids, turn.logprobs
        if turn.completion is not None and ids and logprobs and len(ids) == len(logprobs):
            messages.append(_choice(turn.completion, ids, logprobs))
        elif turn.completion is not None:
            messages.append({"role": "assistant", "content": turn.completion})
        else:
            messages.append({"role": "assistant", "content": json.dumps(turn.action, default=str)})
    metrics: dict[str, float | int | bool] = {
        "turns": len(record.turns),
        "attempts": record.attempts,
        "truncated": record.status == "truncated",
        **{f"reward/{name}": value for name, value in record.reward_components.items()},
    }
    metadata: dict[str, float | int | str | bool | None] = {
        "seed": record.seed,
        "status": record.status,
        "url": record.url,
    }
    return art.Trajectory(messages_and_choices=messages, reward=record.total_reward, metrics=metrics, metadata=metadata)


def trajectory_groups(
    batch: RolloutBatch, group_size: int, system_prompt: str | None = None
) -> list[art.TrajectoryGroup]:
    """A batch played group by group (records `[0, group_size)` the first group, ...) as ART's
    trajectory groups; failed and errored episodes are their group's exceptions.

    Raises:
        ConfigurationError: the batch's size is not a multiple of `group_size`.
    """
    records = list(batch)
    if group_size < 1 or len(records) % group_size:
        raise ConfigurationError(f"{len(records)} episodes do not make groups of {group_size}")
    groups = []
    for start in range(0, len(records), group_size):
        members: list[art.Trajectory | BaseException] = [
            to_trajectory(r, system_prompt) if r.status not in ("failed", "error") else _failure(r)
            for r in records[start : start + group_size]
        ]
        groups.append(art.TrajectoryGroup(members))
    return groups


async def gather_trajectory_groups(
    engine: RolloutEngine,
    groups: int,
    group_size: int,
    *,
    base_seed: int = 0,
    system_prompt: str | None = None,
) -> list[art.TrajectoryGroup]:
    """Play `groups` × `group_size` episodes with `engine`, group `g` on seed `base_seed + g`, and
    return them as ART's trajectory groups (ready for `model.train`).

    Raises:
        ConfigurationError: `groups` or `group_size` below 1.
        Exception: whatever the policy raised.
    """
    if groups < 1 or group_size < 1:
        raise ConfigurationError(f"groups and group_size must be 1 or more, got {groups} and {group_size}")
    seeds = [base_seed + g for g in range(groups) for _ in range(group_size)]
    batch = await engine.run(seeds=seeds)
    return trajectory_groups(batch, group_size, system_prompt)


def _prompt_messages(prompt: Any, seen: int) -> list[Any]:
    """What a turn's prompt adds to the conversation: text as a user message; a chat (a list of
    messages, the whole conversation so far) only the messages past the `seen` first ones."""
    if isinstance(prompt, TokenPrompt):
        return [{"role": "user", "content": prompt.text}]
    if isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m for m in prompt):
        return [dict(m) for m in prompt[seen:]]
    return [{"role": "user", "content": prompt if isinstance(prompt, str) else json.dumps(prompt, default=str)}]


def _choice(text: str, ids: list[int], logprobs: list[float]) -> Choice:
    """The model's answer with its tokens, as ART reads a vLLM choice: each token `token_id:N`."""
    tokens = [
        ChatCompletionTokenLogprob(token=f"token_id:{i}", logprob=lp, top_logprobs=[])
        for i, lp in zip(ids, logprobs, strict=True)
    ]
    return Choice(
        finish_reason="stop",
        index=0,
        message=ChatCompletionMessage(role="assistant", content=text),
        logprobs=ChoiceLogprobs(content=tokens),
    )


def _failure(record: EpisodeRecord) -> EpisodeFailed:
    why = "; ".join(record.errors) or record.status
    return EpisodeFailed(f"episode {record.index} (seed {record.seed}) {record.status}: {why}")
