"""Chess against a configurable opponent, with python-chess keeping the rules.

The agent sends a move (UCI or SAN); the opponent replies at once. An illegal or unreadable move
costs -0.1 and changes nothing; after `max_illegal_moves` of them in a row the agent forfeits.
The game ends on mate, stalemate, insufficient material, the 75-move rule, fivefold repetition,
or after `max_plies` half-moves (a draw). Reward at the end: +1 win, -1 loss, 0 draw.
"""

from __future__ import annotations

import html
import random
import textwrap
import uuid
from typing import Any

import chess

from openenv import Environment

from .opponents import OPPONENTS, choose_move

try:
    from ..models import ChessAction, ChessObservation, ChessState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import ChessAction, ChessObservation, ChessState  # type: ignore[no-redef]

ILLEGAL_PENALTY = -0.1
_COLORS = {"white": chess.WHITE, "black": chess.BLACK}


def _name(color: bool) -> str:
    return "white" if color == chess.WHITE else "black"


def parse_move(board: chess.Board, text: str) -> chess.Move | None:
    """The legal move that `text` names in UCI or SAN, or None."""
    try:
        move = chess.Move.from_uci(text.lower())
        if move in board.legal_moves:
            return move
    except ValueError:
        pass
    try:
        move = board.parse_san(text)
    except ValueError:  # illegal, ambiguous or unreadable
        return None
    return move if move in board.legal_moves else None  # parse_san also reads null moves ("--")


# Puzzles for the Task API: White to move and mate in one. `reset(split="mate_in_one", index=i)` sets
# one up with the agent as White; `solutions` are the mating moves (UCI).
PUZZLES: dict[str, list[dict[str, Any]]] = {
    "mate_in_one": [
        {"id": "back-rank", "fen": "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "solutions": ["a1a8"]},
        {"id": "queen-and-king", "fen": "7k/8/6K1/8/8/8/8/Q7 w - - 0 1", "solutions": ["a1a8", "a1g7"]},
        {"id": "smothered", "fen": "6rk/6pp/7N/8/8/8/8/6K1 w - - 0 1", "solutions": ["h6f7"]},
        {
            "id": "scholars",
            "fen": "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
            "solutions": ["h5f7"],
        },
        {"id": "rook-and-king", "fen": "3k4/8/3K4/8/8/8/8/7R w - - 0 1", "solutions": ["h1h8"]},
        {
            "id": "early-queen",
            "fen": "rnbqkbnr/ppppp2p/5p2/6p1/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 3",
            "solutions": ["d1h5"],
        },
    ],
}


class ChessEnvironment(Environment[ChessAction, ChessObservation, ChessState]):
    """Play chess against a random mover or a small material-search engine."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # The board (with its move stack, for repetition draws) and the RNG the opponent moves with.
    SNAPSHOT_ATTRS = (
        "_rng",
        "_episode_id",
        "_seed",
        "_board",
        "_opponent",
        "_depth",
        "_agent",
        "_max_plies",
        "_max_illegal",
        "_illegal_total",
        "_illegal_streak",
        "_steps",
        "_outcome",
    )

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._board = chess.Board()
        self._opponent = "random"
        self._depth = 2
        self._agent = chess.WHITE
        self._max_plies = 200
        self._max_illegal = 5
        self._illegal_total = 0
        self._illegal_streak = 0
        self._steps = 0
        self._said = ""  # what the last reset or step said: drawn under the board
        self._outcome: str | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        opponent: str = "random",
        depth: int = 2,
        agent_color: str = "white",
        fen: str | None = None,
        max_plies: int = 200,
        max_illegal_moves: int = 5,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> ChessObservation:
        """Set up a new game, or puzzle `index` of `split` (the Task API; the agent plays White).

        Args:
            opponent: "random", "greedy" (one-ply material) or "minimax" (alpha-beta, `depth` plies).
            depth: search depth of "minimax", 1-3.
            agent_color: "white", "black" or "random" (drawn from the seed).
            fen: a starting position (default: the usual one).
            max_plies: half-moves after which the game is a draw.
            max_illegal_moves: illegal moves in a row after which the agent forfeits.

        Raises:
            ValueError: an option is not one of the allowed values.
        """
        if split is not None or index is not None:
            if split not in PUZZLES:
                raise ValueError(f"unknown split {split!r}; the splits are {', '.join(PUZZLES)}")
            if type(index) is not int or not 0 <= index < len(PUZZLES[split]):
                raise ValueError(f"split {split!r} has tasks 0 to {len(PUZZLES[split]) - 1}, not {index!r}")
            fen, agent_color = PUZZLES[split][index]["fen"], "white"
        if opponent not in OPPONENTS:
            raise ValueError(f"opponent must be one of {', '.join(OPPONENTS)}; got {opponent!r}")
        if not isinstance(depth, int) or not 1 <= depth <= 3:
            raise ValueError(f"depth must be 1, 2 or 3, got {depth!r}")
        if agent_color not in ("white", "black", "random"):
            raise ValueError(f"agent_color must be white, black or random, got {agent_color!r}")
        if (
            not isinstance(max_plies, int)
            or max_plies < 1
            or not isinstance(max_illegal_moves, int)
            or max_illegal_moves < 1
        ):
            raise ValueError("max_plies and max_illegal_moves must be positive integers")
        if seed is not None:
            self._rng = random.Random(seed)
        try:
            board = chess.Board(fen) if fen else chess.Board()
        except ValueError as exc:
            raise ValueError(f"fen is not a valid position: {exc}") from None
        if board.is_game_over():
            raise ValueError("fen is a finished position; give one with a legal move")
        self._seed = seed
        self._episode_id = episode_id or str(uuid.uuid4())
        self._board = board
        self._opponent, self._depth = opponent, depth
        self._agent = self._rng.choice([chess.WHITE, chess.BLACK]) if agent_color == "random" else _COLORS[agent_color]
        self._max_plies, self._max_illegal = max_plies, max_illegal_moves
        self._illegal_total = self._illegal_streak = self._steps = 0
        self._outcome = None
        reply = None
        if board.turn != self._agent:
            reply = self._opponent_moves()
            self._game_over()
        return self._observe(
            None, "New game." + (f" The opponent opens with {reply}." if reply else ""), opponent_move=reply
        )

    def list_splits(self) -> list[str]:
        return list(PUZZLES)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """Each task is a position (FEN) where White mates in one; `solutions` are the mating moves."""
        return [dict(p, goal="White to move: checkmate in one") for p in PUZZLES[split]]

    def step(self, action: ChessAction, timeout_s: float | None = None, **kwargs: Any) -> ChessObservation:
        """Play a move; the opponent answers in the same step.

        Raises:
            RuntimeError: the game is over (call reset).
        """
        if self._outcome is not None:
            raise RuntimeError("the game is over; call reset() to start a new one")
        self._steps += 1
        move = parse_move(self._board, action.move)
        if move is None:
            self._illegal_total += 1
            self._illegal_streak += 1
            note = f"{action.move!r} is not a legal move here."
            if self._illegal_streak >= self._max_illegal:
                self._outcome = "loss"
                return self._observe(
                    -1.0, f"{note} {self._illegal_streak} illegal moves in a row: you forfeit.", illegal=True
                )
            return self._observe(ILLEGAL_PENALTY, f"{note} Nothing moved; pick one of the legal moves.", illegal=True)
        self._illegal_streak = 0
        san = self._board.san(move)
        self._board.push(move)
        note = f"You play {san}."
        reply = None
        if not self._game_over():
            reply = self._opponent_moves()
            note += f" The opponent replies {reply}."
            self._game_over()
        reward = {"win": 1.0, "loss": -1.0, "draw": 0.0}.get(self._outcome or "", 0.0)
        if self._outcome is not None:
            note += f" Game over: {self._outcome} ({self._result()})."
        return self._observe(reward, note, last_move=move.uci(), opponent_move=reply)

    @property
    def state(self) -> ChessState:
        return ChessState(
            episode_id=self._episode_id,
            step_count=self._steps,
            opponent=self._opponent,
            depth=self._depth,
            agent_color=_name(self._agent),
            fen=self._board.fen(),
            moves=[m.uci() for m in self._board.move_stack],
            illegal_moves=self._illegal_total,
            seed=self._seed,
        )

    def render(self) -> tuple[str, str]:
        """The board as an SVG picture (python-chess's drawing), from your side, last move marked."""
        import chess.svg

        board = self._board
        last = board.move_stack[-1] if board.move_stack else None
        check = board.king(board.turn) if board.is_check() else None
        drawn = chess.svg.board(board, orientation=self._agent, lastmove=last, check=check, size=400)
        # Under the board, what the last step said (the moves, an illegal one refused, the result):
        # the picture tells the outcome, not only the text beside it. Always three lines high, so that
        # the picture keeps its size from step to step.
        said = "".join(
            f'<text x="200" y="{422 + 20 * i}" font-size="15" text-anchor="middle" fill="#1a1a1b" '
            f'font-family="sans-serif">{html.escape(line)}</text>'
            for i, line in enumerate(textwrap.wrap(self._said, 50)[:3])
        )
        return "image/svg+xml", (
            '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'viewBox="0 0 400 470" width="400" height="470"><title>chess board</title>{drawn}{said}</svg>'
        )

    # -- game -------------------------------------------------------------------------------------------

    def _opponent_moves(self) -> str:
        move = choose_move(self._board, self._opponent, self._depth, self._rng)
        self._board.push(move)
        return move.uci()

    def _game_over(self) -> bool:
        outcome = self._board.outcome()
        if outcome is not None:
            self._outcome = "draw" if outcome.winner is None else ("win" if outcome.winner == self._agent else "loss")
        elif len(self._board.move_stack) >= self._max_plies:
            self._outcome = "draw"
        return self._outcome is not None

    def _result(self) -> str:
        if self._outcome == "draw":
            return "1/2-1/2"
        white_won = (self._outcome == "win") == (self._agent == chess.WHITE)
        return "1-0" if white_won else "0-1"

    def _observe(
        self,
        reward: float | None,
        message: str,
        *,
        illegal: bool = False,
        last_move: str | None = None,
        opponent_move: str | None = None,
    ) -> ChessObservation:
        self._said = message
        board = self._board
        over = self._outcome is not None
        legal = [] if over else sorted(m.uci() for m in board.legal_moves)
        text_board = _labelled(board)
        you = _name(self._agent)
        text = f"{message}\nYou play {you}.\n{text_board}\nFEN: {board.fen()}"
        if not over:
            text += f"\n{'You are in check. ' if board.is_check() else ''}Your legal moves (UCI): {' '.join(legal)}\nReply with one move."
        return ChessObservation(
            fen=board.fen(),
            board=text_board,
            legal_moves=legal,
            agent_color=you,
            turn=_name(board.turn),  # type: ignore[arg-type]
            last_move=last_move,
            opponent_move=opponent_move,
            is_check=board.is_check(),
            illegal_move=illegal,
            result=self._result() if over else None,
            outcome=self._outcome,
            message=message,
            text=text,  # type: ignore[arg-type]
            reward=reward,
            done=over,
        )


def _labelled(board: chess.Board) -> str:
    rows = str(board).splitlines()
    lines = [f"{8 - i} {row}" for i, row in enumerate(rows)]
    lines.append("  a b c d e f g h")
    return "\n".join(lines)
