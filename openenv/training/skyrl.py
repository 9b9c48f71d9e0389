"""SkyRL integration: an OpenEnv env server as a `skyrl_gym` text environment.

    import skyrl_gym
    from openenv.training.skyrl import register_openenv

    register_openenv("blackjack", url="http://127.0.0.1:8001",
                     parse_action=parse_choice("action", ["hit", "stand"]), max_turns=6)
    env = skyrl_gym.make("blackjack", extras={"seed": 3})
    chat, info = env.init([{"role": "system", "content": "Play blackjack."}])
    out = env.step("I hit")          # {"observations", "reward", "done", "metadata"}

SkyRL's generator makes one env per sample with `skyrl_gym.make(env_class, env_config=...,
extras=...)`, calls `init(prompt)` and then `step(model_text)` until `done`: this class is that
env. Each one holds one session on the server (`GenericEnvClient`, observations as dicts): `init`
resets it (the sample's `extras["seed"]` and `extras["reset_kwargs"]`) and adds the observation,
as a user message, to the prompt; `step` turns the model's text into an action
(`parse_action`), steps the env, and answers with the next observation as a user message, the
step's reward and done (the env's, or `max_turns` reached). An action the env rejects is not a
crash: the answer says why, with reward 0, and the episode goes on (SkyRL then trains on it).

Needs the `skyrl` extra (`pip install 'openenv-hub[skyrl]'`: `skyrl-gym`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import (  # type: ignore[import-untyped]  # skyrl-gym ships no type information
    BaseTextEnv,
    BaseTextEnvStepOutput,
    ConversationType,
)
from skyrl_gym.envs.registration import register  # type: ignore[import-untyped]

from openenv.client.generic import GenericEnvClient
from openenv.client.sync import SyncEnvClient
from openenv.errors import ConfigurationError, InvalidActionError
from openenv.training.engine import default_prompt
from openenv.training.records import EpisodeRecord

__all__ = ["OpenEnvTextEnv", "parse_json_action", "register_openenv"]

ParseFn = Callable[[str, Any], Any]
ENTRY_POINT = "openenv.training.skyrl:OpenEnvTextEnv"


def parse_json_action(field: str = "action") -> ParseFn:
    """A `parse_action` for free text: the last `{...}` JSON object in the text is the action; text
    holding none becomes `{field: text}` (the whole answer, stripped)."""

    def parse(text: str, observation: Any) -> dict[str, Any]:
        end = text.rfind("}")
        while end >= 0:
            start = text.rfind("{", 0, end)
            while start >= 0:
                try:
                    found = json.loads(text[start : end + 1])
                except ValueError:
                    start = text.rfind("{", 0, start)
                    continue
                if isinstance(found, dict):
                    return found
                break
            end = text.rfind("}", 0, end)
        return {field: text.strip()}

    return parse


class OpenEnvTextEnv(BaseTextEnv):  # type: ignore[misc]  # an untyped base class
    """One episode on an OpenEnv server, as SkyRL-Gym's text-in / text-out environment.

    Args:
        env_config: SkyRL's per-env-class config (a mapping; OmegaConf's works): `url` (the
            server's base URL), `max_turns` (default 8), `parse_action` (`parse(text, observation)`
            → action; default `parse_json_action()`), `prompt` (`prompt(observation)` → text;
            default the observation's `text`, else its fields as JSON), `reset_kwargs`,
            `client_options` (keyword arguments for the client: token, headers, ...).
        extras: the sample's own: `seed`, `reset_kwargs` (added to the config's), and `url` (this
            sample's server, overriding the config's).

    Raises:
        ConfigurationError: no `url`, or `max_turns` below 1.
    """

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(env_config or {})
        sample = dict(extras or {})
        url = sample.get("url") or config.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigurationError("OpenEnvTextEnv needs the env server's url: env_config={'url': 'http://...'}")
        max_turns = int(config.get("max_turns", 8))
        if max_turns < 1:
            raise ConfigurationError(f"max_turns must be 1 or more, got {max_turns}")
        self.url = url
        self.max_turns = max_turns
        self.parse_action: ParseFn = config.get("parse_action") or parse_json_action()
        self.prompt: Callable[[Any], str] | None = config.get("prompt")
        self.seed: int | None = sample.get("seed")
        self.reset_kwargs = {**dict(config.get("reset_kwargs") or {}), **dict(sample.get("reset_kwargs") or {})}
        self._client_options = dict(config.get("client_options") or {})
        self._client: SyncEnvClient[Any, Any, Any] | None = None
        self.observation: Any = None
        self.total_reward = 0.0
        self.invalid_actions = 0
        self.env_done = False

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Reset the env (a session is opened the first time); returns the prompt with the first
        observation added as a user message, and `{"seed": ...}`."""
        if self._client is None:
            self._client = GenericEnvClient(self.url, **self._client_options).sync().connect()
        result = self._client.reset(**({"seed": self.seed} if self.seed is not None else {}), **self.reset_kwargs)
        self.observation, self.turns, self.total_reward, self.invalid_actions, self.env_done = (
            result.observation,
            0,
            0.0,
            0,
            bool(result.done),
        )
        return [*prompt, {"role": "user", "content": self._text(result.observation)}], {"seed": self.seed}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One of the model's answers as one env step.

        Raises:
            RuntimeError: `init` was not called.
        """
        if self._client is None:
            raise RuntimeError("call init(prompt) before step(): it starts the episode")
        self.turns += 1
        out_of_turns = self.turns >= self.max_turns
        try:
            result = self._client.step(self.parse_action(action, self.observation))
        except InvalidActionError as exc:
            self.invalid_actions += 1
            message = f"That action was refused: {exc}. Answer with a valid action."
            return BaseTextEnvStepOutput(
                observations=[] if out_of_turns else [{"role": "user", "content": message}],
                reward=0.0,
                done=out_of_turns,
                metadata={"invalid_action": str(exc)},
                postprocessed_action=None,
            )
        reward = float(result.reward or 0.0)
        self.total_reward += reward
        self.observation, self.env_done = result.observation, bool(result.done)
        done = self.env_done or out_of_turns
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": self._text(result.observation)}],
            reward=reward,
            done=done,
            metadata={"truncated": out_of_turns and not self.env_done},
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's turns, total reward, refused actions, and whether the env ended it."""
        return {
            "turns": self.turns,
            "total_reward": self.total_reward,
            "invalid_actions": self.invalid_actions,
            "env_done": self.env_done,
        }

    def close(self) -> None:
        """Close the session (its server's place is freed)."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()

    def _text(self, observation: Any) -> str:
        if self.prompt is not None:
            return self.prompt(observation)
        return str(default_prompt(observation, EpisodeRecord(index=0, seed=self.seed)))


def register_openenv(env_id: str = "openenv", **env_config: Any) -> None:
    """Register `OpenEnvTextEnv` in skyrl_gym as `env_id`, with `env_config` (see the class) as its
    defaults; `skyrl_gym.make(env_id, extras={...})` then makes one (an `env_config` given to
    `make` replaces these)."""
    register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env_config": env_config})
