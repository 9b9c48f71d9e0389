"""The SkyRL integration: an OpenEnv server played through `skyrl_gym.make`, as SkyRL's generator
plays a text environment (init with the prompt, then the model's text step by step)."""

from __future__ import annotations

import pytest
import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv

from openenv import ConfigurationError
from openenv.training import parse_choice
from openenv.training.skyrl import OpenEnvTextEnv, parse_json_action, register_openenv


def test_an_env_server_plays_as_a_skyrl_gym_text_env(scored_url: str) -> None:
    register_openenv("openenv-scored", url=scored_url, parse_action=parse_choice("move", ["good", "bad"]), max_turns=8)
    env = skyrl_gym.make("openenv-scored", extras={"seed": 7, "reset_kwargs": {"length": 2}})
    assert isinstance(env, BaseTextEnv)
    try:
        chat, info = env.init([{"role": "system", "content": "Say good."}])
        assert chat == [{"role": "system", "content": "Say good."}, {"role": "user", "content": "seed 7: say good"}]
        assert info == {"seed": 7}

        first = env.step("I think... good!")
        assert (first["reward"], first["done"]) == (1.5, False)
        assert first["observations"] == [{"role": "user", "content": "seed 7: step 1"}]
        last = env.step("bad")
        assert (last["reward"], last["done"], last["observations"]) == (0.5, True, [])  # the env ended it
        assert env.get_metrics() == {"turns": 2, "total_reward": 2.0, "invalid_actions": 0, "env_done": True}

        chat, _ = env.init([])  # the same session, a new episode
        assert chat == [{"role": "user", "content": "seed 7: say good"}]
    finally:
        env.close()


def test_max_turns_ends_the_episode_and_a_refused_action_is_told_not_raised(picky_url: str) -> None:
    env = OpenEnvTextEnv({"url": picky_url, "max_turns": 2}, {"seed": 1})
    try:
        env.init([])
        refused = env.step('{"move": "dance"}')  # parse_json_action: the JSON object is the action
        assert (refused["reward"], refused["done"]) == (0.0, False)
        assert "refused" in refused["observations"][0]["content"] and "move" in refused["metadata"]["invalid_action"]
        cut = env.step('sure: {"move": "ok"}')
        assert (cut["reward"], cut["done"], cut["metadata"]) == (1.0, True, {"truncated": True})
        assert env.get_metrics()["invalid_actions"] == 1
    finally:
        env.close()


def test_bad_configuration_says_what_to_pass() -> None:
    with pytest.raises(ConfigurationError, match="needs the env server's url"):
        OpenEnvTextEnv({}, {})
    with pytest.raises(ConfigurationError, match="max_turns must be 1 or more"):
        OpenEnvTextEnv({"url": "http://127.0.0.1:9", "max_turns": 0})
    with pytest.raises(RuntimeError, match="call init"):
        OpenEnvTextEnv({"url": "http://127.0.0.1:9"}).step("hi")
    parse = parse_json_action("guess")
    assert parse('I say {"guess": "crane"} then {"x": 1', None) == {"guess": "crane"}
    assert parse("  crane ", None) == {"guess": "crane"}
