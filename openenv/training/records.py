"""What a rollout produces and what a policy sees: plain dataclasses, cheap to build per step.

A policy receives a `PolicyInput` and answers with text, a `Completion` (text with token ids and
log-probabilities, as a language model gives them), or an action (a model or a dict). Every
episode leaves an `EpisodeRecord` of its `Turn`s; a batch of them is a `RolloutBatch`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Completion", "EpisodeRecord", "EpisodeStatus", "PolicyInput", "RolloutBatch", "TokenPrompt", "Turn"]

EpisodeStatus = Literal["done", "truncated", "timeout", "error", "failed"]
"""How an episode ended:

- `done`: the environment said so.
- `truncated`: `max_turns` was reached first.
- `timeout`: `episode_timeout_s` ran out.
- `error`: the environment rejected an action or raised (deterministic: not retried).
- `failed`: every attempt lost its server or timed out on a call (`max_attempts` used up).
"""


@dataclass(slots=True)
class TokenPrompt:
    """A prompt already tokenized (used by adapters that track a token transcript)."""

    ids: list[int]
    text: str = ""


@dataclass(slots=True)
class PolicyInput:
    """What a policy is called with, once per turn.

    Attributes:
        prompt: the text (or chat messages, or a `TokenPrompt`) built from the observation.
        observation: the observation itself (a dict, or the client's observation model).
        episode: index of the episode in its batch.
        seed: the episode's seed (stochastic policies can derive their own randomness from it).
        turn: 0 for the first action of the episode.
        attempt: 1 on the first try; higher when the episode is re-run after losing its server.
    """

    prompt: Any
    observation: Any
    episode: int
    seed: int | None
    turn: int
    attempt: int = 1


@dataclass(slots=True)
class Completion:
    """A language model's answer: its text and, when known, its tokens and their log-probabilities."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None


@dataclass(slots=True)
class Turn:
    """One action and what it led to.

    Attributes:
        prompt: what the policy was shown.
        completion: the policy's text (None when it returned an action directly).
        action: the action sent, as a dict.
        reward: the reward of the step (None when the env gave none).
        done: whether this step ended the episode.
        reward_components: the step's named reward parts (observation `metadata["reward_components"]`).
        policy_s, env_s: seconds spent in the policy and waiting for the environment.
        completion_ids, logprobs: the completion's tokens and log-probabilities, when the policy gave them.
    """

    prompt: Any
    completion: str | None
    action: dict[str, Any]
    reward: float | None
    done: bool
    reward_components: dict[str, float] | None = None
    policy_s: float = 0.0
    env_s: float = 0.0
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None


@dataclass(slots=True)
class EpisodeRecord:
    """Everything about one episode.

    Attributes:
        index: position in the batch (records come back in this order).
        seed: the seed passed to `reset`.
        status: how it ended (see `EpisodeStatus`).
        turns: the turns of the last attempt.
        total_reward: sum of the turns' rewards (missing rewards count 0).
        reward_components: each component summed over the turns (empty when the env reports none).
        final_observation: the last observation (a dict, or the client's model).
        url: the server of the last attempt.
        node: the cluster node that served the last attempt (a Ray node id; None outside a cluster).
        attempts: how many times the episode was started (1 unless a server failed).
        errors: why each earlier attempt (and a final failure) went wrong.
        duration_s: wall time of the last attempt; env_s and policy_s split it.
        extra: free space for adapters (e.g. the token transcript of the TRL integration).
    """

    index: int
    seed: int | None
    status: EpisodeStatus = "failed"
    turns: list[Turn] = field(default_factory=list)
    total_reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    final_observation: Any = None
    url: str | None = None
    node: str | None = None
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    started_at: float = 0.0
    duration_s: float = 0.0
    env_s: float = 0.0
    policy_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Number of actions taken."""
        return len(self.turns)

    @property
    def prompts(self) -> list[Any]:
        return [t.prompt for t in self.turns]

    @property
    def completions(self) -> list[str | None]:
        return [t.completion for t in self.turns]

    @property
    def actions(self) -> list[dict[str, Any]]:
        return [t.action for t in self.turns]

    @property
    def rewards(self) -> list[float | None]:
        return [t.reward for t in self.turns]

    @property
    def completion_tokens(self) -> int:
        """Tokens the policy generated over the episode (0 when it reported none)."""
        return sum(len(t.completion_ids or ()) for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (observations that are models are dumped to dicts)."""
        out = asdict(self)
        out["final_observation"] = _plain(self.final_observation)
        out["turns"] = [{**asdict(t), "prompt": _plain(t.prompt)} for t in self.turns]
        out["length"] = self.length
        return out


@dataclass(slots=True)
class RolloutBatch:
    """The records of one `RolloutEngine.run`, in episode order, and how long it took."""

    records: list[EpisodeRecord]
    elapsed_s: float

    def __iter__(self) -> Iterator[EpisodeRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> EpisodeRecord:
        return self.records[index]

    @property
    def episodes_per_s(self) -> float:
        return len(self.records) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def failed(self) -> list[EpisodeRecord]:
        """Episodes that could not be completed on any server."""
        return [r for r in self.records if r.status == "failed"]

    @property
    def retried(self) -> list[EpisodeRecord]:
        """Episodes that needed more than one attempt."""
        return [r for r in self.records if r.attempts > 1]

    @property
    def mean_reward(self) -> float:
        scored = [r.total_reward for r in self.records if r.status != "failed"]
        return sum(scored) / len(scored) if scored else 0.0

    def to_jsonl(self, path: str | Path) -> Path:
        """Write one JSON line per episode; returns the path."""
        path = Path(path)
        with path.open("w", encoding="utf-8") as f:
            for record in self.records:
                f.write(json.dumps(record.to_dict(), default=str, ensure_ascii=False) + "\n")
        return path


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(value, TokenPrompt):
        return {"ids": value.ids, "text": value.text}
    return value
