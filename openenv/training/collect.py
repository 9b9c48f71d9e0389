"""Collecting rollouts into a dataset folder: `results.jsonl` + `metadata.json`.

    folder = RolloutFolder("out/")
    done = folder.collected()                       # episode ids already on disk (resume)
    folder.append(records, env="openenv/blackjack_env")

The layout is upstream OpenEnv's `openenv collect` layout (its reader takes these files): one
JSON object per line with `episode_id`, `messages`, `reward`, `done`, `tool_trace`, `metrics`,
`verify_metrics`, `artifacts`, `task` and `extra`. Every row has the same keys and value types,
and no empty objects, so `datasets.load_dataset("json", data_files=...)` reads it as one table.
Episodes are played by `RolloutEngine` (`collect_rollouts`); the policies here need no model:
`random_policy` and `scripted_policy` pick among the actions the env's schema allows.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.errors import ConfigurationError
from openenv.render import action_choices
from openenv.training.engine import RolloutEngine
from openenv.training.records import EpisodeRecord, PolicyInput

__all__ = [
    "METADATA_FILENAME",
    "RESULTS_FILENAME",
    "CollectProgress",
    "RolloutFolder",
    "collect_rollouts",
    "episode_id",
    "episode_row",
    "random_policy",
    "scripted_policy",
    "text_to_action",
]

RESULTS_FILENAME = "results.jsonl"
METADATA_FILENAME = "metadata.json"


def episode_id(prefix: str, index: int) -> str:
    """The id of the `index`-th episode of a collection (the same on every resume)."""
    return f"{prefix}-{index:06d}"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(_plain(value), sort_keys=True)


def episode_row(record: EpisodeRecord, index: int, *, prefix: str, env: str, revision: str | None) -> dict[str, Any]:
    """One `results.jsonl` row: the episode as chat messages plus its tool trace and figures.

    Values keep one type per key in every row (a step without a reward says so in `rewarded`,
    errors are one string) so a columnar reader infers one schema from the first rows.
    """
    episode = episode_id(prefix, index)
    messages = [{"role": "system", "content": f"{env} episode {episode}, seed {record.seed}"}]
    trace: list[dict[str, Any]] = []
    for turn in record.turns:
        messages.append({"role": "user", "content": _text(turn.prompt)})
        answer = turn.completion if turn.completion is not None else json.dumps(_plain(turn.action), sort_keys=True)
        messages.append({"role": "assistant", "content": answer})
        trace.append(
            {
                "name": "step",
                "arguments": json.dumps(
                    _plain(turn.action), sort_keys=True
                ),  # a string: any env's actions fit one column
                "reward": float(turn.reward) if turn.reward is not None else 0.0,
                "rewarded": turn.reward is not None,
                "done": bool(turn.done),
            }
        )
    if record.final_observation is not None:
        messages.append({"role": "user", "content": _text(record.final_observation)})
    return {
        "episode_id": episode,
        "messages": messages,
        "reward": float(record.total_reward),
        "done": record.status == "done",
        "tool_trace": trace,
        "metrics": {
            "status": record.status,
            "turns": record.length,
            "attempts": record.attempts,
            "duration_s": round(float(record.duration_s), 4),
            "env_s": round(float(record.env_s), 4),
            "policy_s": round(float(record.policy_s), 4),
        },
        "verify_metrics": {
            "total_reward": float(record.total_reward),
            "reward_components": json.dumps(record.reward_components, sort_keys=True),
        },
        "artifacts": {"env": env, "revision": revision or "", "server": record.url or ""},
        "task": {"seed": record.seed if record.seed is not None else -1},
        "extra": {"index": index, "errors": "\n".join(record.errors)},
    }


class RolloutFolder:
    """A collection's folder: appends rows, knows which episodes it holds, writes the metadata."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.results = self.folder / RESULTS_FILENAME
        self.metadata = self.folder / METADATA_FILENAME

    def collected(self) -> set[str]:
        """Ids of the episodes already written. A last line cut short (a crash mid-write) is removed.

        Raises:
            ConfigurationError: a complete line is not an episode row (the folder holds something else).
        """
        if not self.results.exists():
            return set()
        data = self.results.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):  # an unfinished row: it is played again
            with self.results.open("r+b") as handle:
                handle.truncate(keep)
        ids: set[str] = set()
        for number, line in enumerate(data[:keep].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if not isinstance(row, dict) or not isinstance(row.get("episode_id"), str):
                raise ConfigurationError(
                    f"{self.results}:{number} is not an episode row; collect into an empty folder or remove the file"
                )
            ids.add(row["episode_id"])
        return ids

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write `rows` at the end, whole lines only, flushed to disk (a crash loses at most a line)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.results.open("ab") as handle:
            handle.write(b"".join(json.dumps(row, ensure_ascii=False).encode() + b"\n" for row in rows))
            handle.flush()
            os.fsync(handle.fileno())

    def write_metadata(self, metadata: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.metadata.with_name(f".{METADATA_FILENAME}.partial")
        temporary.write_text(json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n")
        temporary.replace(self.metadata)

    def rows(self) -> Iterator[dict[str, Any]]:
        with self.results.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def _choices(schema: dict[str, Any], observation: Any) -> list[dict[str, Any]]:
    plain = observation.model_dump() if hasattr(observation, "model_dump") else observation
    choices = action_choices(schema, plain if isinstance(plain, dict) else None)
    if choices is None:
        raise ConfigurationError(
            "this env's actions are free-form: random and scripted policies need a finite action space "
            "(an enum, a Literal, a bool, or a legal-actions list); use an OpenAI-compatible policy"
        )
    return [dict(choice.action) for choice in choices]


def random_policy(schema: dict[str, Any]) -> Callable[[PolicyInput], dict[str, Any]]:
    """A policy that picks uniformly among the legal actions, reproducibly from the episode's seed."""

    def act(inp: PolicyInput) -> dict[str, Any]:
        legal = _choices(schema, inp.observation)
        if not legal:
            raise ConfigurationError("the env offers no legal action in a running episode")
        return random.Random(f"{inp.seed}:{inp.turn}").choice(legal)

    return act


def scripted_policy(schema: dict[str, Any]) -> Callable[[PolicyInput], dict[str, Any]]:
    """A policy that plays the first legal action every turn (upstream's scripted teacher does the same)."""

    def act(inp: PolicyInput) -> dict[str, Any]:
        legal = _choices(schema, inp.observation)
        if not legal:
            raise ConfigurationError("the env offers no legal action in a running episode")
        return legal[0]

    return act


def text_to_action(schema: dict[str, Any]) -> Callable[[str, Any], dict[str, Any]]:
    """`parse_action` for a model's text: a JSON object in it, else the legal action it names.

    An answer that is neither is sent as the value of the action's one field, so the env
    refuses it and that episode ends as an error (the model's failure is recorded, not hidden).
    """
    from openenv.evaluation import parse_action

    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    required = [name for name in schema.get("required") or [] if name in props and name != "metadata"]
    field = required[0] if len(required) == 1 else next((n for n in props if n != "metadata"), "action")

    def parse(text: str, observation: Any) -> dict[str, Any]:
        try:
            return parse_action(text)
        except ValueError:
            pass
        plain = observation.model_dump() if hasattr(observation, "model_dump") else observation
        words = text.strip().lower()
        for choice in action_choices(schema, plain if isinstance(plain, dict) else None) or []:
            if choice.label.lower() == words or choice.label.lower() in words.split():
                return dict(choice.action)
        return {field: text.strip()}

    return parse


@dataclass
class CollectProgress:
    """How far a collection is: told after each round of episodes."""

    planned: int
    done: int = 0
    skipped: int = 0
    seconds: float = 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


async def collect_rollouts(
    engine: RolloutEngine,
    folder: RolloutFolder,
    episodes: int,
    *,
    env: str,
    revision: str | None = None,
    prefix: str = "ep",
    base_seed: int = 0,
    resume: bool = True,
    round_size: int | None = None,
    on_progress: Callable[[CollectProgress], Awaitable[None] | None] | None = None,
) -> CollectProgress:
    """Play the episodes `folder` does not hold yet, in rounds, appending each round's rows.

    Episode i has id `episode_id(prefix, i)` and seed `base_seed + i`, so a resumed collection
    plays exactly the missing ones with the seeds they would have had.

    Raises:
        ConfigurationError: without `resume`, the folder already holds rows.
    """
    import time

    have = folder.collected()
    if have and not resume:
        raise ConfigurationError(f"{folder.results} already holds {len(have)} episodes; resume, or use a new folder")
    todo = [i for i in range(episodes) if episode_id(prefix, i) not in have]
    progress = CollectProgress(planned=len(todo), skipped=episodes - len(todo))
    size = round_size or max(engine.concurrency * 4, 8)
    started = time.perf_counter()
    for start in range(0, len(todo), size):
        chunk = todo[start : start + size]
        batch = await engine.run(seeds=[base_seed + i for i in chunk])
        folder.append(
            [
                episode_row(record, index, prefix=prefix, env=env, revision=revision)
                for index, record in zip(chunk, batch.records, strict=True)
            ]
        )
        progress.done += len(chunk)
        progress.seconds = time.perf_counter() - started
        if on_progress is not None:
            told = on_progress(progress)
            if told is not None:
                await told
    return progress
