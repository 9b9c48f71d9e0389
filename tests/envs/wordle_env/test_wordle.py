"""wordle_env: scoring, the word list, seeding, the wire, a 1,000-step concurrent soak and the image."""

from __future__ import annotations

import asyncio

import pytest
from wordle_env import WordleAction, WordleEnv
from wordle_env.server.wordle_environment import WordleEnvironment, score, word_lists

from openenv import EnvExecutionError, InvalidActionError
from tests.envs.conftest import serve_env
from tests.envs.soak import describe, soak, wait_sessions_closed


@pytest.fixture(scope="module")
def url():
    with serve_env("wordle_env") as base:
        yield base


@pytest.mark.parametrize(
    ("guess", "answer", "feedback"),
    [
        ("crane", "crane", "GGGGG"),
        ("speed", "abide", "--Y-Y"),  # one e in the answer: only the first e is yellow
        ("eerie", "there", "Y-Y-G"),  # the green e is matched first, then one yellow
        ("lolly", "hello", "-YGG-"),  # two l's in the answer, both green; the first l is gray
        ("abbey", "babes", "YYGG-"),
    ],
)
def test_feedback_handles_repeated_letters(guess: str, answer: str, feedback: str) -> None:
    assert score(guess, answer) == feedback


def test_the_bundled_lists_are_five_letter_words() -> None:
    answers, allowed = word_lists()
    assert len(answers) > 2000 and len(allowed) > 4000
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in allowed)
    assert set(answers) <= allowed and {"crane", "house", "water"} <= allowed


def test_solving_pays_one_and_reveals_the_word() -> None:
    env = WordleEnvironment()
    env.reset(word="house")
    obs = env.step(WordleAction(guess="crane"))
    assert obs.board[-1].feedback == "----G" and obs.guesses_left == 5 and obs.letters["e"] == "correct"
    assert obs.letters["c"] == "absent" and obs.metadata == {"greens": 1, "yellows": 0} and obs.answer is None
    obs = env.step(WordleAction(guess="HOUSE"))
    assert obs.done and obs.reward == 1.0 and obs.answer == "house" and "Solved in 2" in obs.message
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(WordleAction(guess="house"))


def test_invalid_guesses_cost_a_little_and_no_try() -> None:
    env = WordleEnvironment()
    env.reset(seed=1)
    for bad, reason in (
        ("zzzzz", "not in the word list"),
        ("cat", "not a 5-letter word"),
        ("cr4ne", "not a 5-letter word"),
    ):
        obs = env.step(WordleAction(guess=bad))
        assert obs.reward == -0.1 and obs.guesses_left == 6 and reason in obs.message and not obs.done
    assert env.state.invalid_guesses == 3


def test_six_wrong_guesses_lose_and_endless_invalid_ones_end_too() -> None:
    env = WordleEnvironment()
    env.reset(word="house")
    for guess in ("crane", "pilot", "dumpy", "fight", "brick", "wedge"):
        obs = env.step(WordleAction(guess=guess))
    assert obs.done and obs.reward == 0.0 and obs.answer == "house" and "Out of tries" in obs.message
    env.reset(seed=2)
    steps = 0
    while not obs.done or steps == 0:
        obs = env.step(WordleAction(guess="qqqqq"))
        steps += 1
    assert steps == 18 and obs.answer is not None


def test_same_seed_same_word() -> None:
    a, b = WordleEnvironment(), WordleEnvironment()
    for seed in range(10):
        a.reset(seed=seed)
        b.reset(seed=seed)
        assert a.step(WordleAction(guess="crane")) == b.step(WordleAction(guess="crane"))
    hidden = set()
    for seed in range(20):
        env = WordleEnvironment()
        env.reset(seed=seed, max_guesses=1)
        hidden.add(env.step(WordleAction(guess="crane")).answer)
    assert len(hidden) > 15


async def test_client_round_trip_and_errors(url: str) -> None:
    async with WordleEnv(url) as env:
        first = await env.reset(word="water")
        assert "6 tries" in first.observation.text and first.observation.guesses_left == 6
        result = await env.step(WordleAction(guess="Later "))
        assert result.observation.board[0].feedback == "-GGGG"
        assert result.observation.metadata == {"greens": 4, "yellows": 0}  # reward components travel in metadata
        with pytest.raises(InvalidActionError, match="guess"):
            await env.step({"guess": 5})
        with pytest.raises(EnvExecutionError, match="word must be"):
            await env.reset(word="zzzzz")
        assert (await env.step(WordleAction(guess="water"))).reward == 1.0


async def test_concurrent_sessions_with_one_seed_get_the_same_word(url: str) -> None:
    async def run() -> list:
        async with WordleEnv(url) as env:
            await env.reset(seed=77)
            return [(await env.step(WordleAction(guess=g))).observation for g in ("crane", "pilot", "dumpy")]

    first, second = await asyncio.gather(run(), run())
    assert first == second


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    answers, _ = word_lists()

    def choose(rng, obs):
        return WordleAction(guess=rng.choice(answers) if rng.random() < 0.9 else "xyzzy")

    report = await soak(url, WordleEnv, choose)
    assert report.steps == 1000 and report.episodes > 100 and -0.1 in report.rewards
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


@pytest.mark.docker
@pytest.mark.slow
async def test_image_serves_games(env_images) -> None:
    with env_images.run("wordle_env") as base:
        async with WordleEnv(base) as env:
            await env.reset(word="crane")
            assert (await env.step(WordleAction(guess="trace"))).observation.board[0].feedback == "-GGYG"
            assert (await env.step(WordleAction(guess="crane"))).reward == 1.0


def test_render_draws_a_tile_per_letter_coloured_by_its_feedback() -> None:
    from openenv.render import as_frame, sanitize_frame

    env = WordleEnvironment()
    env.reset(word="crane")
    env.step(WordleAction(guess="cigar"))  # C right place, A and R elsewhere, I and G absent
    svg = sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    assert svg.count('stroke="#d3d6da"') == 25  # five rows still empty
    assert svg.count('fill="#6aaa64"') == 1 and svg.count('fill="#c9b458"') == 2 and svg.count('fill="#787c7e"') == 2
    assert [t for t in ("C", "I", "G", "A", "R") if f">{t}</text>" in svg] == ["C", "I", "G", "A", "R"]
    assert ">cigar scores G--YY.</text>" in svg  # what the step said, under the tiles
    env.step(WordleAction(guess="zzzzz"))
    assert "not in the word list" in sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    obs = env.step(WordleAction(guess="crane"))
    assert obs.done and env.render()[1].count('fill="#6aaa64"') == 6
    assert ">Solved in 2!</text>" in sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    env.reset(word="crane", max_guesses=1)
    height = env.render()[1].split('height="', 1)[1].split('"', 1)[0]
    env.step(WordleAction(guess="cigar"))
    out = sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    assert ">word was 'crane'.</text>" in out, out  # the answer, on the picture's second line
    assert env.render()[1].split('height="', 1)[1].split('"', 1)[0] == height  # the picture keeps its size
