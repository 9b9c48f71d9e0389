"""Tests of __ENV_NAME__. Run them with `pytest` in the env's folder."""

from __future__ import annotations

from client import __ENV_CLASS__Env
from models import __ENV_CLASS__Action
from server.app import app
from server.environment import MAX_GUESSES, __ENV_CLASS__Environment

from openenv.testing import serve_app


def _binary_search(step) -> tuple[int, object]:  # noqa: ANN001 - step(guess) -> observation
    low, high, guesses = 1, 100, 0
    while True:
        guess = (low + high) // 2
        obs = step(guess)
        guesses += 1
        if obs.feedback == "higher":
            low = guess + 1
        elif obs.feedback == "lower":
            high = guess - 1
        else:
            return guesses, obs


def test_binary_search_finds_the_secret_within_the_limit() -> None:
    env = __ENV_CLASS__Environment()
    for seed in range(20):
        env.reset(seed=seed)
        guesses, obs = _binary_search(lambda g: env.step(__ENV_CLASS__Action(guess=g)))
        assert obs.feedback == "correct" and obs.reward == 1.0 and obs.done
        assert guesses <= MAX_GUESSES
        assert env.state.solved and env.state.step_count == guesses


def test_the_same_seed_gives_the_same_secret() -> None:
    a, b = __ENV_CLASS__Environment(), __ENV_CLASS__Environment()
    a.reset(seed=3)
    b.reset(seed=3)
    assert [a.step(__ENV_CLASS__Action(guess=g)).feedback for g in (10, 50, 90)] == [
        b.step(__ENV_CLASS__Action(guess=g)).feedback for g in (10, 50, 90)
    ]


def test_the_episode_ends_after_the_last_guess() -> None:
    env = __ENV_CLASS__Environment()
    for seed in range(10):  # a seed whose secret is neither 1 nor 100
        env.reset(seed=seed)
        results = [env.step(__ENV_CLASS__Action(guess=1 if i % 2 == 0 else 100)) for i in range(MAX_GUESSES)]
        if all(r.feedback != "correct" for r in results):
            break
    assert [r.done for r in results] == [False] * (MAX_GUESSES - 1) + [True]
    assert results[-1].feedback == "out of guesses" and results[-1].guesses_left == 0 and results[-1].reward == 0.0
    assert env.step(__ENV_CLASS__Action(guess=50)).done  # stepping after the end changes nothing


def test_a_client_plays_over_the_websocket() -> None:
    with serve_app(app) as url, __ENV_CLASS__Env(url).sync() as env:
        first = env.reset(seed=11)
        assert first.observation.feedback == "start" and first.observation.guesses_left == MAX_GUESSES
        guesses, obs = _binary_search(lambda g: env.step(__ENV_CLASS__Action(guess=g)).observation)
        assert obs.feedback == "correct"
        state = env.state()
        assert state.solved and state.step_count == guesses
