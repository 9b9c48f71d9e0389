"""Wordle: find the hidden five-letter word; each guess says which letters are right.

Feedback per letter: G (right letter, right place), Y (in the word, elsewhere), - (not in the
word, or not that many times). Repeated letters follow the game's usual rule: greens first, then
yellows left to right while the answer still has unmatched copies of the letter.

A guess must be a word from the bundled list (server/words, from SCOWL); an invalid one costs
-0.1 and no try. Reward 1.0 when solved; 0.0 otherwise. After `max_guesses` valid guesses, or
three times that many steps, the game ends. (`metadata` carries the greens and yellows of each
guess, the natural input for a shaped reward or rubric later.)
"""

from __future__ import annotations

import functools
import html
import random
import textwrap
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from openenv import Environment

try:
    from ..models import GuessRow, WordleAction, WordleObservation, WordleState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import GuessRow, WordleAction, WordleObservation, WordleState  # type: ignore[no-redef]

WORDS = Path(__file__).with_name("words")
INVALID_PENALTY = -0.1
WIN_REWARD = 1.0
WORD_LENGTH = 5


@functools.lru_cache(maxsize=1)
def word_lists() -> tuple[tuple[str, ...], frozenset[str]]:
    """(answers, every allowed guess), read once per process."""
    answers = tuple((WORDS / "answers.txt").read_text().split())
    allowed = frozenset((WORDS / "allowed.txt").read_text().split()) | frozenset(answers)
    return answers, allowed


SPLITS = ("train", "test")


@functools.lru_cache(maxsize=1)
def task_words() -> dict[str, tuple[str, ...]]:
    """The answer list split for training and evaluation: every tenth answer is held out for test."""
    answers, _ = word_lists()
    return {"train": tuple(w for i, w in enumerate(answers) if i % 10), "test": answers[::10]}


def score(guess: str, answer: str) -> str:
    """Feedback for `guess` against `answer`: a string of G, Y and - (one per letter)."""
    marks = ["-"] * len(guess)
    unmatched = Counter(a for g, a in zip(guess, answer, strict=True) if g != a)
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            marks[i] = "G"
        elif unmatched[g] > 0:
            marks[i] = "Y"
            unmatched[g] -= 1
    return "".join(marks)


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    """Guess the hidden five-letter word in six tries."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    SNAPSHOT_ATTRS = (
        "_rng",
        "_episode_id",
        "_seed",
        "_answer",
        "_max_guesses",
        "_board",
        "_invalid",
        "_steps",
        "_over",
    )

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._answer = ""
        self._max_guesses = 6
        self._board: list[GuessRow] = []
        self._invalid = 0
        self._steps = 0
        self._over = False
        self._said = ""  # what the last reset or step said: drawn under the board

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        max_guesses: int = 6,
        word: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> WordleObservation:
        """Pick a hidden word: from the seed, `word` for a chosen puzzle, or task `index` of `split`
        (the Task API: `list_tasks(split)`).

        Raises:
            ValueError: `max_guesses` is not 1-20, `word` is not a five-letter word of the list, or
                `split` / `index` name no task.
        """
        answers, allowed = word_lists()
        if split is not None or index is not None:
            try:
                word = _task(split, index)["word"]
            except KeyError:
                raise ValueError(f"unknown split {split!r}; the splits are {', '.join(SPLITS)}") from None
            except IndexError as exc:
                raise ValueError(str(exc)) from None
        if not isinstance(max_guesses, int) or not 1 <= max_guesses <= 20:
            raise ValueError(f"max_guesses must be an integer from 1 to 20, got {max_guesses!r}")
        if word is not None and (not isinstance(word, str) or word.strip().lower() not in allowed):
            raise ValueError(f"word must be a five-letter word from the list, got {word!r}")
        if seed is not None:
            self._rng = random.Random(seed)
        self._seed = seed
        self._episode_id = episode_id or str(uuid.uuid4())
        self._answer = word.strip().lower() if word is not None else self._rng.choice(answers)
        self._max_guesses = max_guesses
        self._board = []
        self._invalid = 0
        self._steps = 0
        self._over = False
        return self._observe(None, f"Guess the hidden {WORD_LENGTH}-letter word. You have {max_guesses} tries.")

    def list_splits(self) -> list[str]:
        return list(SPLITS)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """Each task is one hidden word: `reset(split=..., index=...)` plays it."""
        return [{"id": f"{split}-{i}", "word": w} for i, w in enumerate(task_words()[split])]

    def num_tasks(self, split: str) -> int:
        return len(task_words()[split])

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return _task(split, index)

    def step(self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any) -> WordleObservation:
        """Make a guess.

        Raises:
            RuntimeError: the game is over (call reset).
        """
        if self._over or not self._answer:
            raise RuntimeError("the game is over; call reset() to start a new one")
        self._steps += 1
        guess = action.guess
        _, allowed = word_lists()
        problem = _invalid_reason(guess, allowed)
        if problem is not None:
            self._invalid += 1
            if self._steps >= 3 * self._max_guesses:
                return self._end(INVALID_PENALTY, f"{problem} Too many steps: the word was {self._answer!r}.")
            return self._observe(INVALID_PENALTY, f"{problem} That does not use up a try.")
        feedback = score(guess, self._answer)
        self._board.append(GuessRow(guess=guess, feedback=feedback))
        meta = {"greens": feedback.count("G"), "yellows": feedback.count("Y")}
        if guess == self._answer:
            return self._end(WIN_REWARD, f"Solved in {len(self._board)}!", meta)
        if len(self._board) >= self._max_guesses or self._steps >= 3 * self._max_guesses:
            return self._end(0.0, f"{guess} scores {feedback}. Out of tries: the word was {self._answer!r}.", meta)
        return self._observe(0.0, f"{guess} scores {feedback}.", meta)

    @property
    def state(self) -> WordleState:
        return WordleState(
            episode_id=self._episode_id,
            step_count=self._steps,
            max_guesses=self._max_guesses,
            invalid_guesses=self._invalid,
            seed=self._seed,
        )

    def _end(self, reward: float, message: str, meta: dict[str, Any] | None = None) -> WordleObservation:
        self._over = True
        return self._observe(reward, message, meta)

    def render(self) -> tuple[str, str]:
        """The board as an SVG picture: a row of tiles per guess (green right place, yellow elsewhere, grey absent)."""
        colours = {"G": "#6aaa64", "Y": "#c9b458"}
        tile, gap, parts = 56, 6, []
        for r in range(max(self._max_guesses, len(self._board))):
            row = self._board[r] if r < len(self._board) else None
            for c in range(5):
                x, y = gap + c * (tile + gap), gap + r * (tile + gap)
                if row is None:
                    parts.append(
                        f'<rect x="{x}" y="{y}" width="{tile}" height="{tile}" fill="#fff" stroke="#d3d6da" stroke-width="2"/>'
                    )
                    continue
                fill = colours.get(row.feedback[c : c + 1], "#787c7e")
                parts.append(f'<rect x="{x}" y="{y}" width="{tile}" height="{tile}" fill="{fill}"/>')
                parts.append(
                    f'<text x="{x + tile // 2}" y="{y + 38}" font-size="30" font-weight="bold" text-anchor="middle" '
                    f'fill="#fff" font-family="sans-serif">{row.guess[c : c + 1].upper()}</text>'
                )
        width = gap + 5 * (tile + gap)
        height = gap + max(self._max_guesses, len(self._board)) * (tile + gap)
        # Under the tiles, what the last step said (solved, the answer when out of tries, a word refused):
        # the picture tells the outcome, not only the table beside it.
        lines = textwrap.wrap(self._said, 38)[:3]
        for i, line in enumerate(lines):
            parts.append(
                f'<text x="{width // 2}" y="{height + 18 + 20 * i}" font-size="15" text-anchor="middle" '
                f'fill="#1a1a1b" font-family="sans-serif">{html.escape(line)}</text>'
            )
        height += 8 + 20 * 3  # the same size whatever was said: the picture does not jump between steps
        return "image/svg+xml", (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f"<title>wordle board</title>{''.join(parts)}</svg>"
        )

    def _letters(self) -> dict[str, str]:
        status: dict[str, str] = {}
        rank = {"absent": 0, "present": 1, "correct": 2}
        for row in self._board:
            for letter, mark in zip(row.guess, row.feedback, strict=True):
                new = {"G": "correct", "Y": "present", "-": "absent"}[mark]
                if letter not in status or rank[new] > rank[status[letter]]:
                    status[letter] = new
        return dict(sorted(status.items()))

    def _observe(self, reward: float | None, message: str, meta: dict[str, Any] | None = None) -> WordleObservation:
        self._said = message
        left = self._max_guesses - len(self._board)
        letters = self._letters()
        lines = [f"{row.guess.upper()}  {row.feedback}" for row in self._board] or ["(no guesses yet)"]
        text = f"{message}\nBoard (G = right place, Y = elsewhere in the word, - = not in the word):\n" + "\n".join(
            lines
        )
        if not self._over:
            absent = "".join(k for k, v in letters.items() if v == "absent")
            text += f"\nLetters not in the word: {absent or 'none yet'}. {left} tries left. Reply with one five-letter word."
        return WordleObservation(
            board=list(self._board),
            guesses_left=left,
            letters=letters,
            message=message,  # type: ignore[arg-type]
            answer=self._answer if self._over else None,
            text=text,
            reward=reward,
            done=self._over,
            metadata=meta or {},
        )


def _task(split: str | None, index: int | None) -> dict[str, Any]:
    """Task `index` of `split`.

    Raises:
        KeyError: no such split.  IndexError: no such task.  ValueError: split or index missing.
    """
    if split is None or index is None or type(index) is not int:
        raise ValueError(
            f"give a split and an integer index to play a task, e.g. reset(split='test', index=0); got {split!r}, {index!r}"
        )
    words = task_words()[split]
    if not 0 <= index < len(words):
        raise IndexError(f"split {split!r} has tasks 0 to {len(words) - 1}, not {index}")
    return {"id": f"{split}-{index}", "word": words[index]}


def _invalid_reason(guess: str, allowed: frozenset[str]) -> str | None:
    if len(guess) != WORD_LENGTH or not guess.isascii() or not guess.isalpha():
        return f"{guess!r} is not a {WORD_LENGTH}-letter word."
    if guess not in allowed:
        return f"{guess!r} is not in the word list."
    return None
