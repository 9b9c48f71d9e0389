"""TRL integration: `GRPOTrainer` plays multi-turn episodes on OpenEnv servers.

    from trl import GRPOConfig, GRPOTrainer
    from openenv.training import openenv_grpo_kwargs, parse_choice

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=GRPOConfig(...), train_dataset=dataset,
        **openenv_grpo_kwargs(env=["http://127.0.0.1:8001", "http://127.0.0.1:8002"],
                              parse_action=parse_choice("action", ["hit", "stand"]), max_turns=6),
    )

This uses TRL's `rollout_func` hook (TRL >= 0.24; checked with 1.16). For each batch of prompts,
the rollout plays one episode per row with the rollout engine (concurrent sessions, retries on
other servers), generating every turn with the trainer's own model (batched across episodes).
The rows of one GRPO group (the same prompt, `num_generations` times) get the same env seed, so
their advantages compare answers to the same situation. Each episode becomes one sequence: the
prompt, then the model's answers interleaved with the env's feedback, which is masked out of the
loss (`env_mask`). The episode's total env reward is the `env_reward` reward function; reward
components from the env's rubric and episode statistics are logged as `openenv/...` metrics.

With `branch_at=K` (servers that offer the "fork" extension) a group instead plays K turns once
and forks into `num_generations` children at that state (`RolloutEngine.run_branched`): the
rows then differ only by the decisions after the branch. The shared prefix's answers are masked
out of the loss, as the group's rewards say nothing about them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from openenv.errors import ConfigurationError
from openenv.training._transcript import ChatFormat, TextFormat, Transcript, TurnFormat
from openenv.training.engine import RolloutEngine, default_prompt
from openenv.training.records import EpisodeRecord, RolloutBatch, TokenPrompt

__all__ = ["OpenEnvRollout", "env_reward", "openenv_grpo_kwargs"]


def env_reward(
    prompts: list[Any], completions: list[Any], env_reward: list[float | None], **kwargs: Any
) -> list[float | None]:
    """GRPO reward function: the episode's total reward from the environment (None when the episode failed)."""
    return list(env_reward)


class OpenEnvRollout:
    """A TRL `rollout_func`: `rollout(prompts, trainer) -> {"prompt_ids", "completion_ids", "logprobs", ...}`.

    Args: see `openenv_grpo_kwargs`.
    """

    def __init__(
        self,
        env: Any,
        *,
        parse_action: Callable[[str, Any], Any],
        observation_text: Callable[[Any, EpisodeRecord], str] | None = None,
        turn_format: Callable[[Any], TurnFormat] | str = "auto",
        max_turns: int = 8,
        max_new_tokens: int | None = None,
        concurrency: int | None = None,
        base_seed: int = 0,
        reset_kwargs: dict[str, Any] | None = None,
        step_timeout_s: float | None = 60.0,
        episode_timeout_s: float | None = None,
        max_attempts: int = 3,
        client_cls: Any = None,
        client_options: dict[str, Any] | None = None,
        batch_window_s: float = 0.01,
        on_batch: Callable[[RolloutBatch], None] | None = None,
        servers: int = 1,
        provider_options: dict[str, Any] | None = None,
        branch_at: int | Sequence[int] | None = None,
    ) -> None:
        if not callable(parse_action):
            raise ConfigurationError("parse_action is required: it turns the model's text into an action")
        branch = [branch_at] if isinstance(branch_at, int) else list(branch_at) if branch_at is not None else None
        if branch is not None and (not branch or any(not isinstance(k, int) or k < 0 for k in branch)):
            raise ConfigurationError(
                f"branch_at must be a turn count >= 0 or a non-empty list of them, got {branch_at!r}"
            )
        self.branch_at = branch
        if isinstance(turn_format, str) and turn_format not in ("auto", "chat", "text"):
            raise ConfigurationError(
                "turn_format must be 'auto', 'chat', 'text', or a callable(tokenizer) -> TurnFormat"
            )
        self.providers: list[Any] = []
        self.env = self._start_servers(env, servers, provider_options or {}) if _is_env_folder(env) else env
        self.parse_action = parse_action
        self.observation_text = observation_text or default_prompt
        self.turn_format = turn_format
        self.max_turns = max_turns
        self.max_new_tokens = max_new_tokens
        self.concurrency = concurrency
        self.base_seed = base_seed
        self.engine_options: dict[str, Any] = {
            "max_turns": max_turns,
            "step_timeout_s": step_timeout_s,
            "episode_timeout_s": episode_timeout_s,
            "max_attempts": max_attempts,
            "reset_kwargs": reset_kwargs,
            "client_cls": client_cls,
            "client_options": client_options,
        }
        try:
            RolloutEngine(self.env, lambda inp: None, **self.engine_options)  # check the arguments now, not at step 1
        except BaseException:
            self.close()
            raise
        self.batch_window_s = batch_window_s
        self.on_batch = on_batch
        self.last_batch: RolloutBatch | None = None
        self._groups_done = 0
        self._policy: Any = None
        self._format: TurnFormat | None = None

    def _start_servers(self, folder: str | Path, count: int, options: dict[str, Any]) -> list[str]:
        """Serve an env folder as `count` local processes (stopped by `close()` or at exit)."""
        from openenv.client.providers import ProcessProvider

        if count < 1:
            raise ConfigurationError("servers must be >= 1")
        try:
            for _ in range(count):
                provider = ProcessProvider(folder, **options)
                self.providers.append(provider)
                provider.start()
        except BaseException:
            self.close()
            raise
        return [p.base_url for p in self.providers]

    def close(self) -> None:
        """Stop the servers this rollout started (none when it was given URLs or a pool)."""
        providers, self.providers = self.providers, []
        for provider in providers:
            provider.stop()

    # -- the rollout_func ---------------------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from openenv.training._sync import run_blocking

        training = bool(getattr(trainer.model, "training", True))
        group = int(
            trainer.num_generations
            if training
            else getattr(trainer, "num_generations_eval", None) or trainer.num_generations
        )
        if group < 1 or len(prompts) % group:
            raise ConfigurationError(f"{len(prompts)} prompts do not split into groups of num_generations={group}")
        seeds = self._seeds(len(prompts), group, trainer)
        policy, fmt = self._setup(trainer)
        engine = RolloutEngine(
            self.env,
            policy,
            concurrency=self.concurrency or len(prompts),
            parse_action=self.parse_action,
            prompt=self._prompt_fn(prompts, fmt),
            **self.engine_options,
        )
        if self.branch_at is None:
            batch = run_blocking(engine.run(seeds=seeds))
        else:  # group k of the run branches at branch_at[k % len(branch_at)]
            groups, first = len(prompts) // group, self._groups_done - len(prompts) // group
            at = [self.branch_at[(first + g) % len(self.branch_at)] for g in range(groups)]
            batch = run_blocking(engine.run_branched(groups, group, prefix_steps=at, seeds=seeds[::group]))
        self.last_batch = batch
        out = self._to_trl(batch, fmt, policy)
        self._log(trainer, batch, "train" if training else "eval")
        if self.on_batch is not None:
            self.on_batch(batch)
        return out

    def _seeds(self, n: int, group: int, trainer: Any) -> list[int]:
        # Rows of one group share a seed; processes and calls never reuse one.
        accelerator = getattr(trainer, "accelerator", None)
        procs = int(getattr(accelerator, "num_processes", 1) or 1)
        rank = int(getattr(accelerator, "process_index", 0) or 0)
        first = self._groups_done
        self._groups_done += n // group
        return [self.base_seed + ((first + i // group) * procs + rank) for i in range(n)]

    def _setup(self, trainer: Any) -> tuple[Any, TurnFormat]:
        from openenv.training.hf import TransformersPolicy

        tokenizer = getattr(trainer, "processing_class", None)
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps its tokenizer
        model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
        args = trainer.args
        max_new = self.max_new_tokens or int(getattr(args, "max_completion_length", 32) or 32)
        if self._policy is None or self._policy.model is not model:
            self._policy = TransformersPolicy(
                model,
                tokenizer,
                max_new_tokens=max_new,
                temperature=float(getattr(args, "temperature", 1.0) or 0.0),
                top_p=getattr(args, "top_p", None),
                top_k=getattr(args, "top_k", None) or None,
                chat=False,
                max_batch_size=10_000,
                batch_window_s=self.batch_window_s,
            )
            self._format = self._make_format(tokenizer)
        return self._policy, self._format  # type: ignore[return-value]

    def _make_format(self, tokenizer: Any) -> TurnFormat:
        if callable(self.turn_format):
            return self.turn_format(tokenizer)
        use_chat = self.turn_format == "chat" or (
            self.turn_format == "auto" and bool(getattr(tokenizer, "chat_template", None))
        )
        return ChatFormat(tokenizer) if use_chat else TextFormat(tokenizer)

    def _prompt_fn(self, instructions: list[Any], fmt: TurnFormat) -> Callable[[Any, EpisodeRecord], TokenPrompt]:
        observation_text = self.observation_text

        def prompt(observation: Any, record: EpisodeRecord) -> TokenPrompt:
            text = observation_text(observation, record)
            instruction = instructions[record.index]
            transcript: Transcript | None = record.extra.get("transcript")
            if transcript is None:  # first turn (also after a retry: records are cleared)
                transcript = Transcript(fmt.first(instruction, text))
                record.extra["transcript"] = transcript
                record.extra["history"] = []
            else:
                last = record.turns[-1]
                transcript.add_completion(last.completion_ids or [], last.logprobs)
                if len(record.turns) == record.extra.get("branch_turn"):  # the shared prefix's last answer
                    record.extra["prefix_tokens"] = len(transcript.completion_ids)
                record.extra["history"].append((record.extra["last_text"], last.completion or ""))
                transcript.add_feedback(
                    fmt.feedback(instruction, record.extra["history"], text, last.completion_ids or [])
                )
            record.extra["last_text"] = text
            return TokenPrompt(transcript.context, text)

        return prompt

    # -- evaluation ---------------------------------------------------------------------------------------

    def evaluate(
        self,
        model: Any,
        tokenizer: Any,
        seeds: list[int],
        *,
        instruction: Any = "",
        temperature: float = 0.0,
        concurrency: int = 256,
    ) -> RolloutBatch:
        """Play one episode per seed with `model`, shown exactly what training shows it.

        The prompts, turn format, answer length and action parsing are the training run's; the
        answers are greedy by default. Use seeds training never draws (each GRPO group takes the
        next one from `base_seed`) to measure the policy on held-out episodes.

        Returns:
            the episodes' records, in seed order (`mean_reward`, per-episode `total_reward`).
        """
        from openenv.training._sync import run_blocking
        from openenv.training.hf import TransformersPolicy

        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
        policy = TransformersPolicy(
            model,
            tokenizer,
            max_new_tokens=self.max_new_tokens or 32,
            temperature=temperature,
            chat=False,
            max_batch_size=10_000,
            batch_window_s=self.batch_window_s,
        )
        seed_list = list(seeds)
        engine = RolloutEngine(
            self.env,
            policy,
            concurrency=max(1, min(concurrency, len(seed_list))),
            parse_action=self.parse_action,
            prompt=self._prompt_fn([instruction] * len(seed_list), self._make_format(tokenizer)),
            **self.engine_options,
        )
        was_training = bool(getattr(model, "training", False))
        model.eval()
        try:
            return run_blocking(engine.run(seeds=seed_list))
        finally:
            model.train(was_training)

    # -- results ------------------------------------------------------------------------------------------

    def _to_trl(self, batch: RolloutBatch, fmt: TurnFormat, policy: Any) -> dict[str, Any]:
        out: dict[str, list[Any]] = {
            k: []
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "env_reward",
                "episode_length",
                "turn_completions",
            )
        }
        filler = [policy.pad_id if not policy.eos_ids else min(policy.eos_ids)]
        for record in batch:
            transcript: Transcript | None = record.extra.get("transcript")
            if transcript is None or record.status == "failed":
                # No episode to learn from: one masked token keeps the shapes valid, and a None
                # reward makes TRL leave the row out of the group's baseline.
                prompt = transcript.prompt_ids if transcript is not None else filler
                out["prompt_ids"].append(list(prompt))
                out["completion_ids"].append(list(filler))
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])
                out["env_reward"].append(None)
                out["episode_length"].append(0)
                out["turn_completions"].append([])
                continue
            if transcript.turns_added < len(record.turns):  # the answer that ended the episode
                last = record.turns[-1]
                transcript.add_completion(last.completion_ids or [], last.logprobs)
            if not transcript.completion_ids:  # the episode ended at reset: nothing was generated
                transcript.add_feedback(list(filler))
            out["prompt_ids"].append(transcript.prompt_ids)
            out["completion_ids"].append(transcript.completion_ids)
            out["logprobs"].append(transcript.logprobs)
            shared = record.extra.get("prefix_tokens", 0)  # a branched group's common answers: no signal
            out["env_mask"].append([0] * shared + transcript.env_mask[shared:])
            out["env_reward"].append(float(record.total_reward))
            out["episode_length"].append(record.length)
            out["turn_completions"].append([t.completion or "" for t in record.turns])
        return out

    def _log(self, trainer: Any, batch: RolloutBatch, mode: str) -> None:
        # TRL's per-mode metric store: averaged and logged with the trainer's own metrics.
        metrics = getattr(trainer, "_metrics", None)
        if not isinstance(metrics, dict) or mode not in metrics:
            return
        store = metrics[mode]
        scored = [r for r in batch if r.status != "failed"]
        store["openenv/episode_reward"].append(sum(r.total_reward for r in scored) / max(1, len(scored)))
        store["openenv/episode_length"].append(sum(r.length for r in scored) / max(1, len(scored)))
        store["openenv/episodes_per_s"].append(batch.episodes_per_s)
        store["openenv/retried_frac"].append(len(batch.retried) / max(1, len(batch)))
        store["openenv/failed_frac"].append(len(batch.failed) / max(1, len(batch)))
        names = sorted({n for r in scored for n in r.reward_components})
        for name in names:
            store[f"openenv/reward_components/{name}"].append(
                sum(r.reward_components.get(name, 0.0) for r in scored) / max(1, len(scored))
            )
        store["openenv/rollout_s"].append(batch.elapsed_s)


def openenv_grpo_kwargs(
    env: Any,
    *,
    parse_action: Callable[[str, Any], Any],
    reward_funcs: list[Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Keyword arguments for `GRPOTrainer` that train on an OpenEnv environment.

    Args:
        env: the servers: a base URL, a list of them, a pool with `.urls` (e.g. `EnvPool`), or
            the folder of an env (`"envs/blackjack_env"`), served as `servers` local processes
            (`ProcessProvider(folder, **provider_options)`; `rollout_func.close()` or the end of
            the program stops them).
        parse_action: `parse_action(text, observation)` returns the action for the model's answer.
        reward_funcs: more reward functions to add to the env's reward. Besides TRL's arguments
            they get, per row, `env_reward`, `episode_length` and `turn_completions` (the model's
            answer at each turn, as text: `completions` holds the whole transcript).
        observation_text: `observation_text(observation, record)` the text the model is shown
            (default: the observation's `text` field, else its fields as JSON).
        turn_format: 'auto' (the chat template when the tokenizer has one), 'chat', 'text', or a
            callable(tokenizer) returning a `TurnFormat`.
        max_turns: actions per episode before it is cut (`truncated`).
        max_new_tokens: tokens per answer (default: the config's `max_completion_length`).
        concurrency: sessions at once (default: one per row of the batch).
        base_seed: the first env seed; each GRPO group gets the next one.
        reset_kwargs, step_timeout_s, episode_timeout_s, max_attempts, client_cls,
        client_options: as for `RolloutEngine`.
        on_batch: called with each `RolloutBatch` (to save or inspect episode records).
        branch_at: play each GRPO group from one shared mid-episode state: the group's first K
            turns once, then `num_generations` forked children (servers must offer "fork"). An
            int, or a list whose values the groups take in turn (`[0, 1]`: every other group
            branches after its first turn). The prefix's answers are masked out of the loss.

    Returns:
        `{"rollout_func": OpenEnvRollout(...), "reward_funcs": [env_reward, *reward_funcs]}`.

    Raises:
        ConfigurationError: an argument is wrong (e.g. `env` holds no server URL).
    """
    rollout = OpenEnvRollout(env, parse_action=parse_action, **options)
    return {"rollout_func": rollout, "reward_funcs": [env_reward, *(reward_funcs or [])]}


def _is_env_folder(env: Any) -> bool:
    return isinstance(env, str | Path) and "://" not in str(env) and Path(env).is_dir()
