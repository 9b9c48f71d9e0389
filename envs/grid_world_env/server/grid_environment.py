"""A grid world: walk from the start to the goal around walls, without falling into a pit.

Each reset draws a layout from the seed: walls at the given density, pits, a start and a goal,
redrawn until the goal can be reached without crossing a pit. On a slippery floor (`slip` > 0) a
move goes sideways with that probability. Reward: -0.01 per step, +1 on the goal, -1 in a pit;
the episode is cut off after `max_steps` (default 4 x size²).
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from typing import Any

from openenv import Environment

try:
    from ..models import GridAction, GridObservation, GridState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import GridAction, GridObservation, GridState  # type: ignore[no-redef]

MOVES: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_SIDEWAYS = {"up": ("left", "right"), "down": ("left", "right"), "left": ("up", "down"), "right": ("up", "down")}
STEP_REWARD = -0.01
GOAL_REWARD = 1.0
PIT_REWARD = -1.0
WALL, FLOOR, PIT = "#", ".", "X"
_MAX_TRIES = 200

Cell = tuple[int, int]

# Fixed layouts for training and evaluation (the Task API): each task is the options and seed of a
# reset, so `reset(split=..., index=...)` always draws the same grid. Test layouts are larger.
LEVELS: dict[str, list[dict[str, Any]]] = {
    "train": [{"size": 5 + i % 3, "walls": 0.15 + 0.05 * (i % 3), "pits": i % 3, "seed": 100 + i} for i in range(24)],
    "test": [{"size": 8, "walls": 0.2, "pits": 2, "seed": 900 + i} for i in range(8)],
}


def _reachable(grid: list[list[str]], start: Cell, goal: Cell) -> bool:
    size = len(grid)
    seen, todo = {start}, deque([start])
    while todo:
        r, c = todo.popleft()
        if (r, c) == goal:
            return True
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and (nr, nc) not in seen and grid[nr][nc] == FLOOR:
                seen.add((nr, nc))
                todo.append((nr, nc))
    return False


def generate(rng: random.Random, size: int, walls: float, pits: int) -> tuple[list[list[str]], Cell, Cell]:
    """A layout with a path from start to goal; returns (grid, start, goal).

    Raises:
        ValueError: no such layout was found (too many walls or pits for the size).
    """
    cells = [(r, c) for r in range(size) for c in range(size)]
    for _ in range(_MAX_TRIES):
        grid = [[FLOOR] * size for _ in range(size)]
        start, goal, *rest = rng.sample(cells, len(cells))
        n_walls = int(walls * size * size)
        for r, c in rest[:n_walls]:
            grid[r][c] = WALL
        for r, c in rest[n_walls : n_walls + pits]:
            grid[r][c] = PIT
        if _reachable(grid, start, goal):
            return grid, start, goal
    raise ValueError(f"no {size}x{size} layout with walls={walls} and pits={pits} has a path to the goal; use fewer")


class GridWorldEnvironment(Environment[GridAction, GridObservation, GridState]):
    """Walk to the goal on a seeded grid of walls and pits, rendered as text."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Layout, position and the RNG that decides slips: a restored episode slips the same way.
    SNAPSHOT_ATTRS = (
        "_rng",
        "_episode_id",
        "_seed",
        "_grid",
        "_pos",
        "_goal",
        "_size",
        "_walls",
        "_pits",
        "_slip",
        "_max_steps",
        "_steps",
        "_outcome",
    )

    def __init__(self) -> None:
        self._rng = random.Random()
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._grid: list[list[str]] = []
        self._pos: Cell = (0, 0)
        self._goal: Cell = (0, 0)
        self._size = 0
        self._walls = 0.0
        self._pits = 0
        self._slip = 0.0
        self._max_steps = 0
        self._steps = 0
        self._outcome: str | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        size: int = 6,
        walls: float = 0.2,
        pits: int = 1,
        slip: float = 0.0,
        max_steps: int | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> GridObservation:
        """Draw a new layout, or play the fixed layout `index` of `split` (the Task API).

        Args:
            size: the grid is size x size (3-20).
            walls: fraction of cells that are walls (0-0.5).
            pits: number of pits (0 to size).
            slip: chance that a move goes sideways instead (0-0.5).
            max_steps: steps before the episode is cut off (default 4 x size²).

        Raises:
            ValueError: an option is out of range.
        """
        if split is not None or index is not None:
            _check(split in LEVELS, f"unknown split {split!r}; the splits are {', '.join(LEVELS)}")
            _check(
                type(index) is int and 0 <= index < len(LEVELS[split]),
                f"split {split!r} has tasks 0 to {len(LEVELS[split]) - 1}, not {index!r}",
            )
            level = LEVELS[split][index]
            size, walls, pits, seed = level["size"], level["walls"], level["pits"], level["seed"]
        _check(isinstance(size, int) and 3 <= size <= 20, f"size must be an integer from 3 to 20, got {size!r}")
        _check(
            isinstance(walls, (int, float)) and 0 <= walls <= 0.5,
            f"walls must be a fraction from 0 to 0.5, got {walls!r}",
        )
        _check(
            isinstance(pits, int) and 0 <= pits <= size,
            f"pits must be an integer from 0 to size ({size}), got {pits!r}",
        )
        _check(
            isinstance(slip, (int, float)) and 0 <= slip <= 0.5,
            f"slip must be a probability from 0 to 0.5, got {slip!r}",
        )
        _check(
            max_steps is None or (isinstance(max_steps, int) and max_steps >= 1),
            f"max_steps must be a positive integer, got {max_steps!r}",
        )
        if seed is not None:
            self._rng = random.Random(seed)
        self._seed = seed
        self._episode_id = episode_id or str(uuid.uuid4())
        self._size, self._walls, self._pits, self._slip = size, float(walls), pits, float(slip)
        self._max_steps = max_steps or 4 * size * size
        self._grid, self._pos, self._goal = generate(self._rng, size, float(walls), pits)
        self._steps = 0
        self._outcome = None
        return self._observe(None, "A new grid.")

    def list_splits(self) -> list[str]:
        return list(LEVELS)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """Each task is a fixed layout (its reset options and seed)."""
        return [{"id": f"{split}-{i}", **level} for i, level in enumerate(LEVELS[split])]

    def step(self, action: GridAction, timeout_s: float | None = None, **kwargs: Any) -> GridObservation:
        """Move one cell (walls and edges stop you; you stay put and the step still costs).

        Raises:
            RuntimeError: the episode is over (call reset).
        """
        if self._outcome is not None or not self._grid:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        self._steps += 1
        move = action.move
        if self._slip and self._rng.random() < self._slip:
            move = self._rng.choice(_SIDEWAYS[move])
        target = self._target(self._pos, move)
        note = f"You go {move}." if move == action.move else f"You slip and go {move} instead of {action.move}."
        if target is None:
            note = f"You bump into a wall going {move}."
        else:
            self._pos = target
        reward = STEP_REWARD
        r, c = self._pos
        if self._pos == self._goal:
            self._outcome, reward, note = "goal", GOAL_REWARD, note + " You reach the goal!"
        elif self._grid[r][c] == PIT:
            self._outcome, reward, note = "pit", PIT_REWARD, note + " You fall into a pit."
        elif self._steps >= self._max_steps:
            self._outcome, note = "timeout", note + " Out of steps."
        return self._observe(reward, note)

    @property
    def state(self) -> GridState:
        return GridState(
            episode_id=self._episode_id,
            step_count=self._steps,
            size=self._size,
            walls=self._walls,
            pits=self._pits,
            slip=self._slip,
            seed=self._seed,
        )

    def _target(self, pos: Cell, move: str) -> Cell | None:
        dr, dc = MOVES[move]
        r, c = pos[0] + dr, pos[1] + dc
        if 0 <= r < self._size and 0 <= c < self._size and self._grid[r][c] != WALL:
            return r, c
        return None

    def render(self) -> tuple[str, str]:
        """The grid as an SVG picture: walls dark, pits red, the goal green, you a blue disc."""
        cell, rows = 40, []
        for r, row in enumerate(self._grid):
            for c, kind in enumerate(row):
                fill = {WALL: "#3b3b3b", PIT: "#c0392b"}.get(kind, "#f3f1ea")
                if (r, c) == self._goal:
                    fill = "#2e9e5b"
                rows.append(
                    f'<rect x="{c * cell}" y="{r * cell}" width="{cell}" height="{cell}" fill="{fill}" stroke="#999"/>'
                )
                if kind == PIT:
                    rows.append(
                        f'<text x="{c * cell + 20}" y="{r * cell + 27}" font-size="20" text-anchor="middle" fill="#fff">X</text>'
                    )
        r, c = self._pos
        rows.append(
            f'<circle cx="{c * cell + 20}" cy="{r * cell + 20}" r="14" fill="#2a6fdb" stroke="#fff" stroke-width="3"/>'
        )
        side = cell * max(self._size, 1)
        return "image/svg+xml", (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {side} {side}" width="{side}" height="{side}">'
            f"<title>grid world</title>{''.join(rows)}</svg>"
        )

    def grid_text(self) -> str:
        """The grid as text: one line per row (A you, G goal, # wall, X pit, . floor)."""
        rows = []
        for r, row in enumerate(self._grid):
            line = []
            for c, cell in enumerate(row):
                line.append("A" if (r, c) == self._pos else "G" if (r, c) == self._goal else cell)
            rows.append("".join(line))
        return "\n".join(rows)

    def _observe(self, reward: float | None, note: str) -> GridObservation:
        over = self._outcome is not None
        legal = [] if over else [m for m in MOVES if self._target(self._pos, m) is not None]
        grid = self.grid_text()
        left = self._max_steps - self._steps
        text = (
            f"{note}\n{grid}\nYou are A at row {self._pos[0]}, column {self._pos[1]}; the goal G is at row "
            f"{self._goal[0]}, column {self._goal[1]}. # is a wall, X a pit."
        )
        if not over:
            text += f" {left} steps left. Reply with one move: {', '.join(legal)}."
        return GridObservation(
            grid=grid,
            position=list(self._pos),
            goal=list(self._goal),
            legal_moves=legal,  # type: ignore[arg-type]
            steps_left=left,
            outcome=self._outcome,
            text=text,
            reward=reward,
            done=over,  # type: ignore[arg-type]
        )


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)
