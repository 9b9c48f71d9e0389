"""The random baseline plays the game: it draws from the env's legal actions (the list an
observation gives, or a closed action schema) and says "no baseline for free-form actions" where
none can be known; the reward check it feeds flags a reward outside the declared range or one that
grows with the answer's length, and says one conclusion.

The samplers are tested on schemas and observations; the reward check on small envs served here
(an Atari-like index into a list of names, a chess-like move among listed ones, echo-like text).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import Field

from hub_service.pipeline.trust import TrustContext
from hub_service.pipeline.trust_reward import reward_check
from hub_service.play.policies import FREE_FORM, RandomPolicy, action_source, bounded, legal_action, legal_choices
from hub_service.settings import HubSettings
from openenv import Action, Environment, Observation, State, create_app
from openenv.declared import read_declared
from tests.support.servers import serve_app

ATARI = {  # an index into the observation's `legal_actions`, declared with the full console's 18
    "type": "object",
    "properties": {"action": {"type": "integer", "minimum": 0, "maximum": 17}},
    "required": ["action"],
}
CHESS = {"type": "object", "properties": {"move": {"type": "string", "maxLength": 16}}, "required": ["move"]}
PONG = ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]


def _draws(schema: dict[str, Any], observation: dict[str, Any] | None, n: int = 300) -> list[dict[str, Any]]:
    rng = random.Random(7)
    return [a for a in (legal_action(schema, observation, rng) for _ in range(n)) if a is not None]


def test_an_observations_list_of_legal_actions_is_what_is_drawn() -> None:
    # Atari: the schema allows 0-17, Pong has 6 actions; an integer field indexes the list of names
    assert {a["action"] for a in _draws(ATARI, {"legal_actions": PONG})} == set(range(6))
    assert action_source(ATARI, {"legal_actions": PONG}) == "listed"
    # chess: a free string field, and the position's legal moves
    moves = ["e2e4", "d2d4", "g1f3"]
    assert {a["move"] for a in _draws(CHESS, {"legal_moves": moves})} == set(moves)
    # the same list inside the observation's metadata, or in a wire payload, is read too
    assert {a["move"] for a in _draws(CHESS, {"metadata": {"legal_actions": moves}})} == set(moves)
    assert {a["move"] for a in _draws(CHESS, {"observation": {"legal_moves": moves}, "done": False})} == set(moves)
    # blackjack: an enum narrowed to what is legal now; the list may be longer than a page of buttons
    hit_stand = {"type": "object", "properties": {"action": {"enum": ["hit", "stand"]}}, "required": ["action"]}
    assert _draws(hit_stand, {"legal_actions": ["stand"]}, 20) == [{"action": "stand"}] * 20
    many = [f"m{i}" for i in range(1000)]
    assert len(legal_choices(CHESS, {"legal_moves": many}) or []) == 1000
    # an empty list: the action space is known, and nothing is legal now
    assert legal_action(hit_stand, {"legal_actions": []}, random.Random(1)) is None
    assert action_source(hit_stand, {"legal_actions": []}) == "listed"


def test_a_closed_action_schema_is_drawn_within_its_enums_and_bounds() -> None:
    assert {a["action"] for a in _draws(ATARI, None)} == set(range(18))  # no list: the declared bounds
    assert action_source(ATARI, None) == "declared"
    schema = {
        "type": "object",
        "properties": {
            "dx": {"type": "integer", "exclusiveMinimum": -2, "exclusiveMaximum": 2},
            "power": {"type": "number", "minimum": 0.5, "maximum": 1.0},
            "jump": {"type": "boolean"},
            "tool": {"anyOf": [{"$ref": "#/$defs/Tool"}, {"type": "null"}]},
            "metadata": {"type": "object"},  # every action's, never part of the choice
        },
        "required": ["dx", "power", "jump", "tool"],
        "$defs": {"Tool": {"enum": ["axe", "rope"]}},
    }
    assert bounded(schema) and action_source(schema, {"text": "no list here"}) == "declared"
    draws = _draws(schema, None)
    assert {a["dx"] for a in draws} == {-1, 0, 1} and all(0.5 <= a["power"] <= 1.0 for a in draws)
    assert {a["tool"] for a in draws} == {"axe", "rope"} and {a["jump"] for a in draws} == {True, False}


@pytest.mark.parametrize(
    "schema",
    [
        CHESS,  # text, and no list of legal moves
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},  # no top
        {"type": "object", "properties": {"metadata": {"type": "object"}}},  # nothing to choose
        {  # a closed field beside a text one
            "type": "object",
            "properties": {"persist": {"type": "boolean"}, "code": {"type": "string"}},
            "required": ["code"],
        },
    ],
)
def test_free_form_actions_have_no_baseline(schema: dict[str, Any]) -> None:
    assert not bounded(schema) and action_source(schema, {"board": "..."}) == "free-form"
    assert legal_action(schema, {"board": "..."}, random.Random(1)) is None
    decision = asyncio.run(RandomPolicy(schema, seed=1).act({"board": "..."}, 1))
    assert decision.action is None and decision.fatal and str(decision.error).startswith(FREE_FORM), decision


def test_the_random_baseline_of_the_website_plays_legal_moves() -> None:
    policy = RandomPolicy(ATARI, seed=3)
    actions = [asyncio.run(policy.act({"legal_actions": PONG}, i)).action for i in range(50)]
    assert all(a is not None and 0 <= a["action"] < len(PONG) for a in actions), actions


# -- the reward check on envs served here --------------------------------------------------------


class IndexAction(Action):
    action: int = Field(ge=0, le=17, description="Index into legal_actions.")


class IndexObservation(Observation):
    legal_actions: list[str] = Field(default_factory=list)


class Console(Environment[IndexAction, IndexObservation, State]):
    """Two buttons of an 18-button console: FIRE scores 1; an index past the list is refused."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="console")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> IndexObservation:
        self._state = State(episode_id=episode_id or "console")
        return IndexObservation(legal_actions=["NOOP", "FIRE"], reward=0.0)

    def step(self, action: IndexAction, timeout_s: float | None = None, **kw: Any) -> IndexObservation:
        if action.action > 1:
            raise ValueError(f"{action.action} is not one of the 2 legal actions")
        self._state.step_count += 1
        done = self._state.step_count >= 4
        return IndexObservation(legal_actions=[] if done else ["NOOP", "FIRE"], reward=float(action.action), done=done)

    @property
    def state(self) -> State:
        return self._state


class MoveAction(Action):
    move: str = Field(max_length=16)


class MoveObservation(Observation):
    legal_moves: list[str] = Field(default_factory=list)


class Board(Environment[MoveAction, MoveObservation, State]):
    """A legal move scores 0.25 (four end the game); any other text is an illegal move, -0.1."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="board")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> MoveObservation:
        self._state = State(episode_id=episode_id or "board")
        return MoveObservation(legal_moves=["a1b2", "c3d4"], reward=0.0)

    def step(self, action: MoveAction, timeout_s: float | None = None, **kw: Any) -> MoveObservation:
        if action.move not in ("a1b2", "c3d4"):
            return MoveObservation(legal_moves=["a1b2", "c3d4"], reward=-0.1)
        self._state.step_count += 1
        done = self._state.step_count >= 4
        return MoveObservation(legal_moves=[] if done else ["a1b2", "c3d4"], reward=0.25, done=done)

    @property
    def state(self) -> State:
        return self._state


class TextAction(Action):
    message: str


class TextObservation(Observation):
    echoed: str = ""


class PaidByLength(Environment[TextAction, TextObservation, State]):
    """Pays 0.1 a character, without end: a flood scores whatever it likes."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State(episode_id="paid")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> TextObservation:
        self._state = State(episode_id=episode_id or "paid")
        return TextObservation(reward=0.0)

    def step(self, action: TextAction, timeout_s: float | None = None, **kw: Any) -> TextObservation:
        self._state.step_count += 1
        return TextObservation(echoed=action.message[:20], reward=0.1 * len(action.message))

    @property
    def state(self) -> State:
        return self._state


def _check(env: type[Environment], action: type[Action], obs: type[Observation], tmp: Path, **validation: Any) -> Any:
    settings = HubSettings(data_dir=tmp, reward_check_episodes=4, reward_check_max_steps=80)
    with serve_app(create_app(env, action, obs)) as url:
        schema = httpx.get(url + "/schema", timeout=30).json()["action"]
        declared = read_declared({"validation": validation} if validation else None)
        ctx = TrustContext(settings, url, None, schema, declared, None, {}, lambda line: None)
        return asyncio.run(reward_check(ctx))


def test_the_baseline_indexes_the_listed_actions_not_the_declared_bounds(tmp_path: Path) -> None:
    out = _check(Console, IndexAction, IndexObservation, tmp_path, reward={"range": [0.0, 1.0]})
    assert out["rejected_actions"] == 0, out  # never an index past the two legal actions
    assert out["verdict"] == "ok" and out["baseline_from"] == "completed episodes", out
    assert len(out["baseline_returns"]) == 4 and all(0 <= r <= 4 for r in out["baseline_returns"]), out
    assert out["baseline_actions"].startswith("random legal actions") and out["no_baseline"] is None, out


def test_the_baseline_plays_the_listed_moves_not_words(tmp_path: Path) -> None:
    out = _check(Board, MoveAction, MoveObservation, tmp_path, reward={"range": [-0.1, 1.0]})
    # random words would be illegal moves every step (-0.1 each, never an end); legal moves win in 4
    assert out["baseline_returns"] == [1.0] * 4 and out["observed_min"] == 0.25, out
    assert out["verdict"] == "ok", out


def test_free_form_text_gets_no_baseline_and_a_reward_growing_with_length_is_flagged(tmp_path: Path) -> None:
    bare = _check(PaidByLength, TextAction, TextObservation, tmp_path)  # nothing declared
    assert bare["baseline_returns"] == [] and bare["no_baseline"].startswith(FREE_FORM), bare
    assert bare["verdict"] == "flagged", bare
    assert bare["flags"] == [
        "the reward grows with the answer's length: a 1,000-character answer scored 100, a 100,000-character one 10000"
    ], bare
    declared = _check(PaidByLength, TextAction, TextObservation, tmp_path, reward={"range": [0.0, 100.0]})
    assert declared["verdict"] == "flagged", declared
    assert "rewards outside the declared range [0, 100]: 10000" in declared["flags"], declared
    assert any(f.startswith("the reward grows with the answer's length") for f in declared["flags"]), declared
