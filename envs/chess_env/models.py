"""The chess environment's models: a move in (UCI or SAN); the position as FEN, text and legal moves out."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from openenv import Action, Observation, State


class ChessAction(Action):
    """Your move, in UCI (`e2e4`, `e7e8q`) or SAN (`e4`, `Nf3`, `O-O`)."""

    move: str = Field(max_length=16, description="A move in UCI or SAN notation.")

    @field_validator("move", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value


class ChessObservation(Observation):
    """The position after your move and the opponent's reply.

    Reward: +1 win, -1 loss, 0 draw at the end; -0.1 for an illegal move (the position stays); else 0.
    """

    fen: str = Field(default="", description="The position in Forsyth-Edwards Notation.")
    board: str = Field(default="", description="The board as text: upper case white, lower case black, rank 8 on top.")
    legal_moves: list[str] = Field(
        default_factory=list, description="Your legal moves in UCI (empty once the game is over)."
    )
    agent_color: Literal["white", "black"] = Field(default="white", description="The side you play.")
    turn: Literal["white", "black"] = Field(default="white", description="The side to move.")
    last_move: str | None = Field(default=None, description="Your last move (UCI), if it was legal.")
    opponent_move: str | None = Field(default=None, description="The opponent's reply (UCI).")
    is_check: bool = Field(default=False, description="The side to move is in check.")
    illegal_move: bool = Field(default=False, description="Your move was illegal or unreadable; nothing moved.")
    result: str | None = Field(default=None, description='"1-0", "0-1" or "1/2-1/2" once the game is over.')
    outcome: Literal["win", "loss", "draw"] | None = Field(default=None, description="The game's result for you.")
    message: str = Field(default="", description="What happened, in words.")
    text: str = Field(default="", description="Board, side to move and legal moves in words, for a language model.")


class ChessState(State):
    """Episode id, step count, the opponent and the game so far."""

    opponent: str = "random"
    depth: int = 0
    agent_color: str = "white"
    fen: str = ""
    moves: list[str] = Field(default_factory=list, description="The game's moves in UCI, both sides.")
    illegal_moves: int = 0
    seed: int | None = None
