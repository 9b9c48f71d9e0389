"""chess_env: moves in UCI and SAN, illegal moves, opponents, seeding, the wire, the soak and the image."""

from __future__ import annotations

import asyncio
import random

import chess
import pytest
from chess_env import ChessAction, ChessEnv
from chess_env.server.chess_environment import ChessEnvironment
from chess_env.server.opponents import choose_move, material

from openenv import EnvExecutionError
from tests.envs.conftest import serve_env
from tests.envs.soak import describe, soak, wait_sessions_closed


@pytest.fixture(scope="module")
def url():
    with serve_env("chess_env") as base:
        yield base


def test_moves_in_uci_and_san_are_played_and_answered() -> None:
    env = ChessEnvironment()
    obs = env.reset(seed=1)
    assert obs.fen == chess.STARTING_FEN and len(obs.legal_moves) == 20 and "e2e4" in obs.legal_moves
    assert obs.board.splitlines()[0].startswith("8 r n b q k b n r") and obs.turn == "white"
    obs = env.step(ChessAction(move="e2e4"))
    assert obs.last_move == "e2e4" and obs.opponent_move is not None and obs.turn == "white" and obs.reward == 0.0
    obs = env.step(ChessAction(move="Nf3"))
    assert obs.last_move == "g1f3"
    moves = env.state.moves
    assert moves[0] == "e2e4" and moves[2] == "g1f3" and len(moves) == 4


@pytest.mark.parametrize("bad", ["e2e5", "Qh5", "hello", "--", "0000", ""])
def test_illegal_moves_cost_a_tenth_and_change_nothing(bad: str) -> None:
    env = ChessEnvironment()
    before = env.reset(seed=2)
    obs = env.step(ChessAction(move=bad))
    assert obs.illegal_move and obs.reward == -0.1 and obs.fen == before.fen and not obs.done
    assert "not a legal move" in obs.message and obs.legal_moves == before.legal_moves


def test_repeated_illegal_moves_forfeit() -> None:
    env = ChessEnvironment()
    env.reset(seed=3, max_illegal_moves=3)
    for _ in range(2):
        assert not env.step(ChessAction(move="e2e5")).done
    obs = env.step(ChessAction(move="e2e5"))
    assert obs.done and obs.outcome == "loss" and obs.reward == -1.0 and obs.result == "0-1"


def test_fools_mate_is_a_loss_and_a_mate_is_a_win() -> None:
    env = ChessEnvironment()
    env.reset(fen="rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", agent_color="black")
    obs = env.step(ChessAction(move="Qh4#"))
    assert obs.done and obs.outcome == "win" and obs.reward == 1.0 and obs.result == "0-1" and obs.opponent_move is None
    env.reset(fen="rnbqkbnr/pppp1ppp/8/4p3/8/5P2/PPPPP1PP/RNBQKBNR w KQkq - 0 2", opponent="greedy")
    obs = env.step(ChessAction(move="g4"))  # a one-ply search sees the mate in one
    assert obs.done and obs.outcome == "loss" and obs.reward == -1.0 and obs.opponent_move == "d8h4"


def test_engine_takes_free_material_and_avoids_hanging_its_queen() -> None:
    rng = random.Random(0)
    board = chess.Board("4k3/8/8/3q4/8/8/3R4/4K3 b - - 0 1")  # black to move can take the rook on d2
    assert choose_move(board, "greedy", 1, rng).uci() == "d5d2"
    # The rook is defended by the king here: taking loses the queen, which depth 2 sees.
    board = chess.Board("4k3/8/8/3q4/8/8/3R4/3K4 b - - 0 1")
    move = choose_move(board, "minimax", 2, rng)
    board.push(move)
    assert move.uci() != "d5d2" and material(board) <= 0  # from white's view black stays ahead


def test_black_agent_sees_the_opening_move_and_same_seed_same_game() -> None:
    env = ChessEnvironment()
    obs = env.reset(seed=4, agent_color="black", opponent="minimax", depth=1)
    assert obs.agent_color == "black" and obs.opponent_move is not None and obs.turn == "black"
    games = []
    for _ in range(2):
        env = ChessEnvironment()
        obs, trace = env.reset(seed=12, opponent="random", agent_color="random"), []
        rng = random.Random(5)
        for _ in range(20):
            if obs.done:
                break
            obs = env.step(ChessAction(move=rng.choice(obs.legal_moves)))
            trace.append(obs.fen)
        games.append(trace)
    assert games[0] == games[1]


def test_options_are_checked() -> None:
    env = ChessEnvironment()
    with pytest.raises(ValueError, match="opponent must be one of random, greedy, minimax"):
        env.reset(opponent="stockfish")
    with pytest.raises(ValueError, match="fen is not a valid position"):
        env.reset(fen="not a fen")
    with pytest.raises(ValueError, match="depth must be"):
        env.reset(opponent="minimax", depth=9)


def test_a_game_ends_in_a_draw_at_max_plies() -> None:
    env = ChessEnvironment()
    obs = env.reset(seed=6, max_plies=6)
    rng = random.Random(0)
    while not obs.done:
        obs = env.step(ChessAction(move=rng.choice(obs.legal_moves)))
    assert obs.outcome == "draw" and obs.result == "1/2-1/2" and len(env.state.moves) == 6


async def test_client_round_trip_and_errors(url: str) -> None:
    async with ChessEnv(url) as env:
        first = await env.reset(seed=8, opponent="minimax", depth=2)
        assert len(first.observation.legal_moves) == 20 and "Your legal moves" in first.observation.text
        result = await env.step(ChessAction(move="d4"))
        assert result.observation.last_move == "d2d4" and result.observation.opponent_move
        bad = await env.step(ChessAction(move="Ke3"))
        assert bad.observation.illegal_move and bad.reward == -0.1
        with pytest.raises(EnvExecutionError, match="opponent must be"):
            await env.reset(opponent="deep blue")
        state = await env.state()
        assert state.opponent == "minimax" and state.moves[0] == "d2d4" and state.illegal_moves == 1


async def test_concurrent_sessions_with_one_seed_play_the_same_game(url: str) -> None:
    async def run() -> list[str]:
        rng = random.Random(3)
        async with ChessEnv(url) as env:
            obs = (await env.reset(seed=31, opponent="greedy")).observation
            fens = []
            for _ in range(15):
                if obs.done:
                    break
                obs = (await env.step(ChessAction(move=rng.choice(obs.legal_moves)))).observation
                fens.append(obs.fen)
            return fens

    first, second = await asyncio.gather(run(), run())
    assert first == second and len(first) > 5


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    def choose(rng, obs):
        if rng.random() < 0.05:
            return ChessAction(move=rng.choice(["e9e9", "Zz", "O-O-O-O"]))
        return ChessAction(move=rng.choice(obs.legal_moves))

    report = await soak(url, ChessEnv, choose, reset_kwargs={"opponent": "greedy", "max_plies": 120})
    assert report.steps == 1000 and report.episodes > 0 and -0.1 in report.rewards
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


@pytest.mark.docker
@pytest.mark.slow
async def test_image_serves_games(env_images) -> None:
    with env_images.run("chess_env") as base:
        async with ChessEnv(base) as env:
            await env.reset(seed=1, opponent="minimax", depth=2)
            result = await env.step(ChessAction(move="e4"))
            assert result.observation.opponent_move and result.observation.fen != chess.STARTING_FEN
            assert (await env.step(ChessAction(move="e5e6"))).observation.illegal_move


def test_render_draws_the_board_from_your_side_with_the_last_move() -> None:
    from openenv.render import as_frame, frame_html, sanitize_frame

    env = ChessEnvironment()
    env.reset(seed=1, agent_color="black")
    frame = as_frame(env.render())
    assert frame is not None and frame.media_type == "image/svg+xml"
    svg = sanitize_frame(frame).text()
    assert "lastmove" in svg and svg.count("<use") == 32  # white opened; every piece drawn
    import re

    king_y = float(re.search(r'href="#white-king"[^>]*translate\([\d.]+, ([\d.]+)\)', svg).group(1))  # type: ignore[union-attr]
    assert king_y < 100  # black's view: white's king at the top
    assert frame_html(frame).startswith('<img class="oe-frame"')
    # what the step said is drawn under the board: an illegal move refused, then the game's result
    env.step(ChessAction(move="a1a1"))
    assert "is not a legal move here" in sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
    env.reset(fen="6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", agent_color="white")
    env.step(ChessAction(move="a1a8"))
    assert "Game over: win (1-0)" in sanitize_frame(as_frame(env.render())).text()  # type: ignore[arg-type]
