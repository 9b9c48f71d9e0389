"""`RolloutEngine`: run a policy against many concurrent sessions of env servers.

    engine = RolloutEngine(["http://127.0.0.1:8001", "http://127.0.0.1:8002"], policy,
                           concurrency=64, parse_action=parse_choice("action", ["hit", "stand"]))
    batch = await engine.run(256, base_seed=1000)      # 256 episodes, seeds 1000..1255
    batch.mean_reward, batch[0].turns[0].completion

Each of `concurrency` workers keeps one session (one WebSocket) open and plays episodes on it
back to back. An episode whose server dies, refuses the session, or does not answer a call within
`step_timeout_s` is started again from a fresh `reset` with the same seed, on the least busy
healthy server (the lost one rests a while), up to `max_attempts` times; the rest of the batch
goes on meanwhile. An action the env rejects, or an env that raises, ends only that episode
(`status="error"`): the same seed would fail the same way. Exceptions raised by the policy are
bugs in the caller's code and stop the run.

Given a pool, the engine follows its current servers: a pool that replaces a dead server
(`EnvPool.ray` does, when an actor or a whole node dies) lends the replacement to the episodes
still to play, and each record names the node that served it (`EpisodeRecord.node`).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from openenv.client.base import EnvClient
from openenv.client.generic import GenericEnvClient
from openenv.errors import (
    CapacityReachedError,
    ConfigurationError,
    EnvConnectionError,
    EnvDisconnectedError,
    EnvExecutionError,
    EnvFactoryError,
    EnvServerError,
    EnvTimeoutError,
    InvalidActionError,
)
from openenv.training._servers import ServerSet, urls_of
from openenv.training.records import Completion, EpisodeRecord, PolicyInput, RolloutBatch, Turn

__all__ = ["RolloutEngine", "default_prompt", "parse_choice"]

Policy = Callable[[PolicyInput], Any]
PromptFn = Callable[[Any, EpisodeRecord], Any]
ParseFn = Callable[[str, Any], Any]

# Errors that say "this server or session is unwell", not "this episode is wrong": retried elsewhere.
_INFRA_ERRORS = (EnvConnectionError, EnvDisconnectedError, EnvTimeoutError, CapacityReachedError, EnvFactoryError)
_CAPACITY_BACKOFF_S = 0.05
_MAX_CAPACITY_RETRIES = 100  # about a minute of waiting for a full server to free a session


def default_prompt(observation: Any, record: EpisodeRecord) -> str:
    """The observation's `text` field when it has one (LLM-ready envs do), else its fields as JSON."""
    if isinstance(observation, dict):
        text = observation.get("text")
        if isinstance(text, str):
            return text
        from openenv.protocol import dumps

        return dumps({k: v for k, v in observation.items() if k not in ("metadata", "reward", "done")}).decode()
    text = getattr(observation, "text", None)
    if isinstance(text, str):
        return text
    if isinstance(observation, BaseModel):
        return observation.model_dump_json(exclude={"metadata", "reward", "done"})
    return str(observation)


def parse_choice(field: str, choices: Sequence[str], default: str | None = None) -> ParseFn:
    """A `parse_action` for one-word actions: the first of `choices` named in the text wins.

    `parse_choice("action", ["hit", "stand"], default="stand")` turns "I will HIT." into
    `{"action": "hit"}`; text naming none of them gives `default` (or, without one, the first choice).
    """
    if not choices:
        raise ConfigurationError("parse_choice needs at least one choice")
    lowered = [c.lower() for c in choices]
    fallback = default if default is not None else choices[0]

    def parse(text: str, observation: Any) -> dict[str, Any]:
        low = text.lower()
        best, where = fallback, len(low) + 1
        for choice, key in zip(choices, lowered, strict=True):
            at = low.find(key)
            if 0 <= at < where:
                best, where = choice, at
        return {field: best}

    return parse


class _AttemptFailed(Exception):
    """Internal: an attempt lost its session; `server_down` says whether to route around the server."""

    def __init__(self, message: str, server_down: bool = True) -> None:
        super().__init__(message)
        self.server_down = server_down


class RolloutEngine:
    """Runs a policy against N concurrent sessions of one or more env servers.

    Args:
        env: where the servers are: a base URL, a list of base URLs, or a pool (anything with a
            `urls` attribute, e.g. `EnvPool`, whose `client_cls` and `client_options` are reused).
        policy: an async (or plain) callable `policy(PolicyInput)` that returns an action (a dict
            or the env's action model), text, or a `Completion`. Text becomes an action through
            `parse_action`.
        client_cls: the client class (default `GenericEnvClient`: observations are dicts).
        concurrency: sessions played at once.
        prompt: `prompt(observation, record)` builds what the policy is shown (default
            `default_prompt`: the observation's `text`).
        parse_action: `parse_action(text, observation)` returns the action for a text answer.
        max_turns: an episode still running after this many actions ends as `truncated`.
        step_timeout_s: a reset or step not answered within this is a lost session (retried).
        episode_timeout_s: an episode (policy time included) running longer ends as `timeout`.
        max_attempts: starts per episode before it is recorded as `failed`.
        reset_kwargs: options sent with every reset besides the seed (e.g. `{"decks": 6}`).
        client_options: other keyword arguments for each client (token, headers, ...).

    Raises:
        ConfigurationError: an argument is out of range or `env` holds no URL.
    """

    def __init__(
        self,
        env: Any,
        policy: Policy,
        *,
        client_cls: type[EnvClient[Any, Any, Any]] | None = None,
        concurrency: int = 16,
        prompt: PromptFn | None = None,
        parse_action: ParseFn | None = None,
        max_turns: int = 100,
        step_timeout_s: float | None = 60.0,
        episode_timeout_s: float | None = None,
        max_attempts: int = 3,
        reset_kwargs: dict[str, Any] | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        urls, from_pool = urls_of(env)
        if concurrency < 1:
            raise ConfigurationError("concurrency must be >= 1")
        if max_turns < 1 or max_attempts < 1:
            raise ConfigurationError("max_turns and max_attempts must be >= 1")
        for name, value in (("step_timeout_s", step_timeout_s), ("episode_timeout_s", episode_timeout_s)):
            if value is not None and value <= 0:
                raise ConfigurationError(f"{name} must be > 0 (or None for no limit)")
        if not callable(policy):
            raise ConfigurationError("policy must be a callable: async def policy(inp: PolicyInput) -> action or text")
        self.urls = urls
        self._pool = env if hasattr(env, "urls") and not isinstance(env, str) else None
        self.policy = policy
        self.client_cls = client_cls or from_pool.get("client_cls") or GenericEnvClient
        self.client_options = {**from_pool.get("client_options", {}), **(client_options or {})}
        self.client_options["message_timeout_s"] = step_timeout_s
        self.concurrency = concurrency
        self.prompt = prompt or default_prompt
        self.parse_action = parse_action
        self.max_turns = max_turns
        self.step_timeout_s = step_timeout_s
        self.episode_timeout_s = episode_timeout_s
        self.max_attempts = max_attempts
        self.reset_kwargs = dict(reset_kwargs or {})

    # -- running ------------------------------------------------------------------------------------

    async def run(
        self,
        episodes: int | None = None,
        *,
        seeds: Sequence[int | None] | None = None,
        base_seed: int = 0,
        reset_kwargs: dict[str, Any] | None = None,
    ) -> RolloutBatch:
        """Play a batch of episodes; returns their records in episode order.

        Args:
            episodes: how many; their seeds are `base_seed`, `base_seed + 1`, ...
            seeds: or the seed of each episode explicitly (None: the server picks).
            reset_kwargs: reset options for this batch (added to the engine's).

        Raises:
            ConfigurationError: neither or both of `episodes` and `seeds` were given.
            Exception: whatever the policy raised (the other episodes are cancelled).
        """
        if (episodes is None) == (seeds is None):
            raise ConfigurationError("give either episodes=N or seeds=[...]")
        seed_list: list[int | None] = (
            list(seeds) if seeds is not None else [base_seed + i for i in range(episodes or 0)]
        )
        records = [EpisodeRecord(index=i, seed=s) for i, s in enumerate(seed_list)]
        options = {**self.reset_kwargs, **(reset_kwargs or {})}
        pool = self._pool
        servers = ServerSet(self.urls, (lambda: pool.urls) if pool is not None else None)
        todo = iter(records)
        start = time.perf_counter()
        workers = min(self.concurrency, len(records))
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(self._worker(todo, servers, options))
        return RolloutBatch(records, time.perf_counter() - start)

    async def run_branched(
        self,
        groups: int,
        group_size: int,
        *,
        prefix_steps: int | Sequence[int] = 0,
        base_seed: int = 0,
        seeds: Sequence[int] | None = None,
    ) -> RolloutBatch:
        """GRPO groups from shared mid-episode states: each group's seed, `prefix_steps` turns (one
        count for all groups, or one per group), then `group_size` forked children played to the
        end (servers must offer "fork"; see `openenv.training.branching`)."""
        from openenv.training.branching import run_branched

        return await run_branched(self, groups, group_size, prefix_steps=prefix_steps, base_seed=base_seed, seeds=seeds)

    def run_sync(self, episodes: int | None = None, **kwargs: Any) -> RolloutBatch:
        """`run` for blocking code (scripts, notebooks with a running loop included)."""
        from openenv.training._sync import run_blocking

        return run_blocking(self.run(episodes, **kwargs))

    # -- one worker: a session and the episodes played on it ----------------------------------------------

    async def _worker(self, todo: Any, servers: ServerSet, options: dict[str, Any]) -> None:
        session: tuple[str, EnvClient[Any, Any, Any]] | None = None
        try:
            for record in todo:  # a shared iterator: each record goes to exactly one worker
                session = await self._play(record, session, servers, options)
        finally:
            if session is not None:
                servers.release(session[0])
                await session[1].close()

    async def _play(
        self,
        record: EpisodeRecord,
        session: tuple[str, EnvClient[Any, Any, Any]] | None,
        servers: ServerSet,
        options: dict[str, Any],
    ) -> tuple[str, EnvClient[Any, Any, Any]] | None:
        """Run `record`'s episode to an end, retrying on other servers; returns the session to reuse."""
        full = 0  # refusals by full servers: they do not use up attempts, but are bounded
        while True:
            record.attempts += 1
            record.turns, record.total_reward, record.reward_components, record.extra = [], 0.0, {}, {}
            try:
                if session is None:
                    session = await self._open(servers)
                record.url = session[0]
                record.node = self._node_of(session[0])
                await self._episode(session[1], record, options)
                return session
            except _AttemptFailed as exc:
                lost = session
                session = None
                if lost is not None:
                    servers.release(lost[0])
                    if exc.server_down:
                        servers.mark_down(lost[0])
                    await lost[1].close()
                if not exc.server_down and full < _MAX_CAPACITY_RETRIES:
                    full += 1
                    record.attempts -= 1
                    await asyncio.sleep(min(1.0, _CAPACITY_BACKOFF_S * full))
                    continue
                record.errors.append(f"attempt {record.attempts}: {exc}")
                if record.attempts >= self.max_attempts:
                    record.status = "failed"
                    return None

    def _node_of(self, url: str) -> str | None:
        node_of = getattr(self._pool, "node_of", None)
        return node_of(url) if node_of is not None else None

    async def _open(self, servers: ServerSet) -> tuple[str, EnvClient[Any, Any, Any]]:
        url = servers.pick()
        try:
            rest = servers.wait_s(url)
            if rest:  # every server is resting: wait for the first one back rather than spin
                await asyncio.sleep(rest)
            client = self.client_cls(url, **self.client_options)
            await client.connect()
        except (EnvConnectionError, EnvTimeoutError) as exc:
            servers.release(url)
            servers.mark_down(url)
            raise _AttemptFailed(str(exc)) from None
        except BaseException:
            servers.release(url)
            raise
        servers.mark_up(url)
        return url, client

    async def _episode(self, client: EnvClient[Any, Any, Any], record: EpisodeRecord, options: dict[str, Any]) -> None:
        record.started_at = time.time()
        t_start = time.perf_counter()
        record.env_s = record.policy_s = 0.0
        try:
            if self.episode_timeout_s is None:
                await self._steps(client, record, options)
            else:
                async with asyncio.timeout(self.episode_timeout_s):
                    await self._steps(client, record, options)
        except CapacityReachedError as exc:
            raise _AttemptFailed(str(exc), server_down=False) from None
        except _INFRA_ERRORS as exc:
            raise _AttemptFailed(str(exc)) from None
        except (InvalidActionError, EnvExecutionError, EnvServerError) as exc:
            record.status = "error"
            record.errors.append(str(exc))
        except TimeoutError:  # the episode's own deadline (env calls have their own, above)
            record.status = "timeout"
            record.errors.append(f"the episode ran past episode_timeout_s={self.episode_timeout_s:g}")
            await client.close()  # a call may still be in flight: start the next episode on a clean socket
        finally:
            record.duration_s = time.perf_counter() - t_start

    async def _steps(self, client: EnvClient[Any, Any, Any], record: EpisodeRecord, options: dict[str, Any]) -> None:
        perf = time.perf_counter
        policy, prompt_fn, turns = self.policy, self.prompt, record.turns
        t0 = perf()
        result = (
            await client.reset(seed=record.seed, **options)
            if record.seed is not None
            else await client.reset(**options)
        )
        record.env_s += perf() - t0
        observation = result.observation
        for turn in itertools.count():
            if result.done:
                record.status = "done"
                break
            if turn >= self.max_turns:
                record.status = "truncated"
                break
            prompt = prompt_fn(observation, record)
            t0 = perf()
            out = policy(PolicyInput(prompt, observation, record.index, record.seed, turn, record.attempts))
            if inspect.isawaitable(out):
                out = await out
            t1 = perf()
            completion, action = self._action_of(out, observation)
            result = await client.step(action)
            t2 = perf()
            record.policy_s += t1 - t0
            record.env_s += t2 - t1
            observation = result.observation
            reward = result.reward
            components = _components(observation)
            if reward is not None:
                record.total_reward += reward
            if components:
                summed = record.reward_components
                for name, value in components.items():
                    if isinstance(value, int | float):
                        summed[name] = summed.get(name, 0.0) + value
            turns.append(
                Turn(
                    prompt,
                    completion.text if completion is not None else None,
                    action.model_dump(exclude={"metadata"}) if isinstance(action, BaseModel) else action,
                    reward,
                    result.done,
                    components,
                    t1 - t0,
                    t2 - t1,
                    completion.token_ids if completion is not None else None,
                    completion.logprobs if completion is not None else None,
                )
            )
        record.final_observation = observation

    def _action_of(self, out: Any, observation: Any) -> tuple[Completion | None, Any]:
        if isinstance(out, str):
            out = Completion(out)
        if isinstance(out, Completion):
            if self.parse_action is None:
                raise ConfigurationError(
                    "the policy answered with text: pass parse_action=... (e.g. parse_choice('action', ['hit', 'stand'])) "
                    "to turn it into an action, or make the policy return the action itself"
                )
            return out, self.parse_action(out.text, observation)
        if isinstance(out, dict | BaseModel):
            return None, out
        raise TypeError(
            f"the policy returned a {type(out).__name__}; return an action (dict or model), text, or a Completion"
        )


def _components(observation: Any) -> dict[str, float] | None:
    metadata = observation.get("metadata") if isinstance(observation, dict) else getattr(observation, "metadata", None)
    if not metadata:
        return None
    found = metadata.get("reward_components")
    return dict(found) if isinstance(found, dict) and found else None
