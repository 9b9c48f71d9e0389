"""Snapshots of the bundled envs: a restored state has the same future as the original, in the
same instance and in a fresh one (a fork's child), RNG included; coding_env says why it cannot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from atari_env.models import AtariAction
from atari_env.server.atari_environment import AtariEnvironment
from blackjack_env import BlackjackAction, BlackjackEnv
from blackjack_env.server.blackjack_environment import BlackjackEnvironment
from chess_env.models import ChessAction
from chess_env.server.chess_environment import ChessEnvironment
from coding_env.server.coding_environment import CodingEnvironment
from echo_env.models import EchoAction
from echo_env.server.echo_environment import EchoEnvironment
from grid_world_env.models import GridAction
from grid_world_env.server.grid_environment import GridWorldEnvironment
from wordle_env.models import WordleAction
from wordle_env.server.wordle_environment import WordleEnvironment

from tests.envs.conftest import serve_env
from tests.support.servers import ROOT

WORDS = (ROOT / "envs" / "wordle_env" / "server" / "words" / "answers.txt").read_text().split()[:12]

# env class, reset options, prefix steps, and the next action given the last observation and step index
Case = tuple[type[Any], dict[str, Any], int, Callable[[Any, int], Any]]
CASES: dict[str, Case] = {
    "echo": (EchoEnvironment, {"max_steps": 50}, 3, lambda obs, i: EchoAction(message=f"m{i}")),
    "blackjack_infinite": (BlackjackEnvironment, {}, 0, lambda obs, i: BlackjackAction(action="hit")),
    "blackjack_shoe": (BlackjackEnvironment, {"decks": 1}, 0, lambda obs, i: BlackjackAction(action="hit")),
    "grid_slippery": (
        GridWorldEnvironment,
        {"size": 8, "walls": 0.1, "pits": 0, "slip": 0.4},
        4,
        lambda obs, i: GridAction(move=("up", "right", "down", "left")[i % 4]),
    ),
    "wordle": (WordleEnvironment, {}, 2, lambda obs, i: WordleAction(guess=WORDS[i % len(WORDS)])),
    "chess_random_opponent": (
        ChessEnvironment,
        {"opponent": "random"},
        3,
        lambda obs, i: ChessAction(move=sorted(obs.legal_moves)[i % len(obs.legal_moves)]),
    ),
    "atari_sticky": (
        AtariEnvironment,
        {"game": "pong", "repeat_action_probability": 0.5},
        20,
        lambda obs, i: AtariAction(action=i % len(obs.legal_actions)),
    ),
}


def _play(
    env: Any, obs: Any, start: int, steps: int, act: Callable[[Any, int], Any]
) -> tuple[list[dict[str, Any]], Any]:
    seen = []
    for i in range(start, start + steps):
        if obs.done:
            break
        obs = env.step(act(obs, i))
        seen.append(obs.model_dump())
    return seen, obs


@pytest.mark.parametrize("name", list(CASES))
def test_a_restored_state_has_the_same_future(name: str) -> None:
    cls, options, prefix, act = CASES[name]
    assert cls.supports_snapshots()
    env = cls()
    obs = env.reset(seed=7, **options)
    _, obs = _play(env, obs, 0, prefix, act)
    assert not obs.done, "the prefix ended the episode; the case needs a shorter one"
    snap = env.snapshot()
    at_snapshot = env.state.model_dump()
    first, _ = _play(env, obs, prefix, 12, act)
    assert first, "nothing was played after the snapshot"
    env.restore(snap)
    again, _ = _play(env, obs, prefix, 12, act)
    assert again == first  # same instance, restored
    child = cls()
    child.restore(snap)
    assert child.state.model_dump() == at_snapshot
    in_child, _ = _play(child, obs, prefix, 12, act)
    assert in_child == first  # a fresh instance, as a fork's child is
    env.close()
    child.close()


def test_the_rng_is_part_of_the_state_so_other_seeds_differ() -> None:
    """Guards the test above: without the RNG in the snapshot the future would not repeat."""
    outcomes = set()
    for seed in range(6):
        env = BlackjackEnvironment()
        env.reset(seed=seed)
        outcomes.add(tuple(env.step(BlackjackAction(action="hit")).player_cards))
    assert len(outcomes) > 1


def test_coding_env_says_why_it_cannot_be_forked() -> None:
    assert not CodingEnvironment.supports_snapshots()
    assert "live sandboxed Python process" in CodingEnvironment.SNAPSHOT_UNSUPPORTED


async def test_a_blackjack_session_forks_into_eight_children_with_the_parents_future() -> None:
    with serve_env("blackjack_env") as url:
        async with BlackjackEnv(url) as env:
            await env.reset(seed=11, decks=2)
            kids = await env.fork(8)
            ends = [await k.step(BlackjackAction(action="stand")) for k in kids]
            own = await env.step(BlackjackAction(action="stand"))
            assert {tuple(e.observation.dealer_cards) for e in ends} == {tuple(own.observation.dealer_cards)}
            assert {e.reward for e in ends} == {own.reward}


def test_atari_children_restore_into_a_spare_emulator_with_the_same_future() -> None:
    act = CASES["atari_sticky"][3]
    options = {"game": "breakout", "repeat_action_probability": 0.5}
    env, other = AtariEnvironment(), AtariEnvironment()
    obs = env.reset(seed=3, **options)
    _, obs = _play(env, obs, 0, 30, act)
    snap = env.snapshot()
    first, _ = _play(env, obs, 30, 40, act)
    other_obs = other.reset(seed=99, **options)
    _play(other, other_obs, 0, 77, lambda o, i: AtariAction(action=(i * 7) % len(o.legal_actions)))
    used = other._ale
    other.close()  # its emulator becomes a spare
    child = AtariEnvironment()
    child.restore(snap)
    assert child._ale is used  # no ROM load: the spare, its own past overwritten by the restore
    again, _ = _play(child, obs, 30, 40, act)
    assert again == first
    env.close()
    child.close()
