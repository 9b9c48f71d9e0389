"""blackjack_env: the rules, seeding, the wire, a 1,000-step concurrent soak and the image."""

from __future__ import annotations

import asyncio
import random

import pytest
from blackjack_env import BlackjackAction, BlackjackEnv
from blackjack_env.server.blackjack_environment import BlackjackEnvironment, hand_total

from openenv import EnvExecutionError, InvalidActionError
from tests.envs.conftest import serve_env
from tests.envs.soak import describe, soak, wait_sessions_closed


@pytest.fixture(scope="module")
def url():
    with serve_env("blackjack_env") as base:
        yield base


def play(env: BlackjackEnvironment, seed: int, actions: list[str]) -> list[dict]:
    trace = [env.reset(seed=seed).model_dump()]
    for name in actions:
        if trace[-1]["done"]:
            break
        trace.append(env.step(BlackjackAction(action=name)).model_dump())
    return trace


def test_hand_totals_count_aces_as_one_or_eleven() -> None:
    assert hand_total(["A♠", "K♥"]) == (21, True)
    assert hand_total(["A♠", "A♥", "9♦"]) == (21, True)
    assert hand_total(["A♠", "9♦", "5♣"]) == (15, False)
    assert hand_total(["K♠", "Q♦", "5♣"]) == (25, False)


def test_same_seed_same_hand_and_other_seeds_differ() -> None:
    a, b = BlackjackEnvironment(), BlackjackEnvironment()
    actions = ["hit", "hit", "stand"]
    assert play(a, 11, actions) == play(b, 11, actions)
    hands = {tuple(play(a, seed, [])[0]["player_cards"]) for seed in range(20)}
    assert len(hands) > 10


def test_dealer_draws_to_seventeen_and_outcome_matches_totals() -> None:
    env = BlackjackEnvironment()
    for seed in range(200):
        env.reset(seed=seed)
        obs = env.step(BlackjackAction(action="stand"))
        assert obs.done and obs.legal_actions == []
        player, dealer = obs.player_total, obs.dealer_total
        assert dealer >= 17
        if obs.outcome == "win":
            assert obs.reward == 1.0 and (dealer > 21 or player > dealer)
        elif obs.outcome == "push":
            assert obs.reward == 0.0 and player == dealer
        elif obs.outcome == "loss":
            assert obs.reward == -1.0 and (dealer <= 21 and dealer >= player)
        else:
            assert obs.outcome == "blackjack" and obs.reward == 1.5 and len(obs.player_cards) == 2 and player == 21


def test_bust_ends_the_hand_with_minus_one() -> None:
    env = BlackjackEnvironment()
    obs = env.reset(seed=5)
    while not obs.done:
        obs = env.step(BlackjackAction(action="hit"))
    assert obs.player_total > 21 and obs.outcome == "loss" and obs.reward == -1.0
    assert len(obs.dealer_cards) == 2  # the dealer does not draw against a busted player
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(BlackjackAction(action="hit"))


def test_a_natural_pays_the_configured_payout() -> None:
    env = BlackjackEnvironment()
    for seed in range(5000):
        obs = env.reset(seed=seed, blackjack_payout=1.2)
        if obs.player_total == 21:
            final = env.step(BlackjackAction(action="stand"))
            if final.outcome == "blackjack":
                assert final.reward == 1.2 and "Blackjack!" in final.text
                return
    pytest.fail("no natural dealt in 5000 seeded hands")


def test_a_finite_shoe_never_repeats_a_card_in_one_deck() -> None:
    env = BlackjackEnvironment()
    for seed in range(50):
        obs = env.reset(seed=seed, decks=1)
        while not obs.done:
            obs = env.step(BlackjackAction(action="hit"))
        cards = obs.player_cards + obs.dealer_cards
        assert len(cards) == len(set(cards))
    with pytest.raises(ValueError, match="decks must be"):
        env.reset(decks=9)


def test_text_tells_a_language_model_what_to_answer() -> None:
    obs = BlackjackEnvironment().reset(seed=3)
    assert "Your hand:" in obs.text and "The dealer shows" in obs.text and "hit or stand" in obs.text
    assert obs.legal_actions == ["hit", "stand"] and len(obs.dealer_cards) == 1


async def test_client_plays_a_hand_and_bad_input_gets_clear_errors(url: str) -> None:
    async with BlackjackEnv(url) as env:
        first = await env.reset(seed=42)
        assert first.reward is None and not first.done and first.observation.legal_actions == ["hit", "stand"]
        result = await env.step(BlackjackAction.model_validate({"action": " Stand "}))
        assert result.done and result.reward in (-1.0, 0.0, 1.0, 1.5)
        with pytest.raises(InvalidActionError, match="action"):
            await env.step({"action": "double"})
        with pytest.raises(EnvExecutionError, match="call reset"):
            await env.step(BlackjackAction(action="hit"))
        with pytest.raises(EnvExecutionError, match="decks must be"):
            await env.reset(decks=-1)
        again = await env.reset(seed=42)  # still usable, and the same seed deals the same hand
        assert again.observation.player_cards == first.observation.player_cards
        state = await env.state()
        assert state.seed == 42 and state.step_count == 0


async def test_concurrent_sessions_with_one_seed_play_identically(url: str) -> None:
    async def run() -> list:
        async with BlackjackEnv(url) as env:
            out = [(await env.reset(seed=9)).observation]
            while not out[-1].done:
                out.append(
                    (
                        await env.step(BlackjackAction(action="hit" if out[-1].player_total < 15 else "stand"))
                    ).observation
                )
            return out

    first, second = await asyncio.gather(run(), run())
    assert first == second


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    report = await soak(url, BlackjackEnv, lambda rng, obs: BlackjackAction(action=rng.choice(obs.legal_actions)))
    assert report.steps == 1000 and report.episodes > 100
    assert set(report.rewards) <= {-1.0, 0.0, 1.0, 1.5}
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


@pytest.mark.docker
@pytest.mark.slow
async def test_image_serves_hands(env_images) -> None:
    with env_images.run("blackjack_env") as base:
        async with BlackjackEnv(base) as env:
            result = await env.reset(seed=1)
            while not result.done:
                result = await env.step(BlackjackAction(action=random.choice(["hit", "stand"])))
            assert result.observation.outcome is not None


def test_render_draws_the_cards_and_turns_the_dealers_over_at_the_end() -> None:
    from openenv.render import as_frame, sanitize_frame

    env = BlackjackEnvironment()
    obs = env.reset(seed=5)
    svg = sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    assert all(card in svg for card in obs.player_cards) and obs.dealer_cards[0] in svg
    assert svg.count('fill="#8b1e2d"') == 1  # the dealer's hole card, face down
    obs = env.step(BlackjackAction(action="stand"))
    svg = env.render()[1]
    assert obs.done and all(card in svg for card in obs.dealer_cards) and 'fill="#8b1e2d"' not in svg
    assert {"win": "You win", "blackjack": "Blackjack!", "push": "Push", "loss": "You lose"}[
        obs.outcome or "push"
    ] in svg
