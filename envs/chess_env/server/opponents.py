"""Opponents for the chess environment: a random mover and a small material-search engine.

The engine is negamax with alpha-beta over material (P 1, N 3, B 3, R 5, Q 9), mate and draws;
captures are searched first. Ties between equally good moves are broken by the episode's random
generator, so the same seed plays the same game.
"""

from __future__ import annotations

import random

import chess

__all__ = ["OPPONENTS", "choose_move"]

OPPONENTS = ("random", "greedy", "minimax")
_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
_MATE = 1000


def material(board: chess.Board) -> int:
    """Material of the side to move minus the other side's."""
    us, them = board.occupied_co[board.turn], board.occupied_co[not board.turn]
    score = 0
    for piece, value in _VALUES.items():
        mask = board.pieces_mask(piece, chess.WHITE) | board.pieces_mask(piece, chess.BLACK)
        score += value * (chess.popcount(mask & us) - chess.popcount(mask & them))
    return score


def _ordered(board: chess.Board) -> list[chess.Move]:
    moves = list(board.legal_moves)
    moves.sort(key=lambda m: (not board.is_capture(m), m.promotion is None))
    return moves


def _negamax(board: chess.Board, depth: int, alpha: int, beta: int, ply: int) -> int:
    if board.is_checkmate():
        return -_MATE + ply  # a quicker mate is better for the winner
    if (
        board.is_stalemate()
        or board.is_insufficient_material()
        or board.is_seventyfive_moves()
        or board.is_fivefold_repetition()
    ):
        return 0
    if depth == 0:
        return material(board)
    best = -_MATE * 2
    for move in _ordered(board):
        board.push(move)
        score = -_negamax(board, depth - 1, -beta, -alpha, ply + 1)
        board.pop()
        if score > best:
            best = score
        alpha = max(alpha, score)
        if alpha >= beta:
            break
    return best


def choose_move(board: chess.Board, opponent: str, depth: int, rng: random.Random) -> chess.Move:
    """The opponent's move in `board` (which must have a legal move).

    Args:
        opponent: "random" (any legal move), "greedy" (best material after one ply) or "minimax"
            (alpha-beta to `depth` plies).
    """
    moves = list(board.legal_moves)
    if opponent == "random":
        return rng.choice(moves)
    plies = 1 if opponent == "greedy" else depth
    scored: list[tuple[int, chess.Move]] = []
    for move in moves:
        board.push(move)
        # Full window at the root, so equal moves score equally and the tie-break stays fair.
        scored.append((-_negamax(board, plies - 1, -_MATE * 2, _MATE * 2, 1), move))
        board.pop()
    best = max(score for score, _ in scored)
    return rng.choice([m for score, m in scored if score == best])
