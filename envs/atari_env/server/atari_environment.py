"""Atari 2600 games through the Arcade Learning Environment.

ale-py's wheel ships the ROMs, so nothing is downloaded at run time. A step repeats the action for
`frameskip` frames and sums the points; with `repeat_action_probability` (sticky actions, 0.25 as
in the ALE's v5 protocol) the console sometimes repeats the previous action instead, drawn from
the emulator's own seeded generator, so a seed still fixes the whole episode. The observation
carries the last frame as a PNG and the 128 bytes of RAM.
"""

from __future__ import annotations

import base64
import copy
import difflib
import functools
import random
import struct
import threading
import uuid
import zlib
from typing import TYPE_CHECKING, Any

from ale_py import ALEInterface, LoggerMode, roms

from openenv import Environment

if TYPE_CHECKING:
    import numpy as np

try:
    from ..models import AtariAction, AtariObservation, AtariState
except ImportError:  # `uvicorn server.app:app` from the env's folder
    from models import AtariAction, AtariObservation, AtariState  # type: ignore[no-redef]

ALEInterface.setLoggerMode(LoggerMode.Error)  # the ALE prints a banner per ROM load otherwise

# Emulators of closed sessions, by (game, repeat_action_probability), for restores: loading a ROM
# takes a few hundred ms, and `restoreState` (RNG included) overwrites all an emulator's state, so
# a fork's children start from a spare at once. Resets always load afresh (their seed is set first).
_SPARES_PER_GAME = 8
_spares: dict[tuple[str, float], list[ALEInterface]] = {}
_spares_lock = threading.Lock()


def _take_spare(key: tuple[str, float]) -> ALEInterface | None:
    with _spares_lock:
        spares = _spares.get(key)
        return spares.pop() if spares else None


def _give_spare(key: tuple[str, float] | None, ale: ALEInterface | None) -> None:
    if key is None or ale is None:
        return
    with _spares_lock:
        spares = _spares.setdefault(key, [])
        if len(spares) < _SPARES_PER_GAME:
            spares.append(ale)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@functools.lru_cache(maxsize=1)
def available_games() -> tuple[str, ...]:
    """The ROM ids shipped with ale-py."""
    return tuple(sorted(roms.get_all_rom_ids()))


def encode_png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG of an (h, w, 3) RGB or (h, w) grayscale uint8 array, rows unfiltered."""
    import numpy as np  # imported at the first frame, not at start-up: the server comes up faster

    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    rows = np.zeros((height, width * channels + 1), dtype=np.uint8)  # column 0: filter type 0
    rows[:, 1:] = pixels.reshape(height, -1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 0, 0, 0, 0)
    return b"".join(
        (
            _PNG_SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)),
            _chunk(b"IEND", b""),
        )
    )


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


class AtariEnvironment(Environment[AtariAction, AtariObservation, AtariState]):
    """Atari 2600 games from the ALE: screen as PNG, RAM, frame skip and sticky actions."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._ale: ALEInterface | None = None
        self._rng = random.Random()
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._game = ""
        self._frameskip = 4
        self._sticky = 0.25
        self._obs_type = "rgb"
        self._max_frames = 108_000
        self._actions: list[Any] = []
        self._score = 0.0
        self._steps = 0
        self._done = False
        self._loaded: tuple[str, float] | None = None  # the ROM and sticky-action setting self._ale has

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        game: str = "pong",
        frameskip: int = 4,
        repeat_action_probability: float = 0.25,
        obs_type: str = "rgb",
        full_action_space: bool = False,
        mode: int | None = None,
        difficulty: int | None = None,
        max_episode_frames: int = 108_000,
        **kwargs: Any,
    ) -> AtariObservation:
        """Load `game` and start an episode.

        Args:
            game: a ROM id shipped with ale-py, e.g. "pong", "breakout", "space_invaders".
            frameskip: frames each action is repeated for (1-16).
            repeat_action_probability: chance that the console repeats the previous action (0-1).
            obs_type: "rgb" (210x160x3) or "grayscale" (210x160).
            full_action_space: all 18 actions instead of the game's minimal set.
            mode, difficulty: a game mode / difficulty the ROM supports.
            max_episode_frames: frames after which the episode is cut off (truncated).

        Raises:
            ValueError: an unknown game or an option out of range (the message lists what is valid).
        """
        games = available_games()
        if game not in games:
            near = difflib.get_close_matches(str(game), games, n=3)
            hint = (
                f"did you mean {', '.join(near)}?" if near else f"choose one of {len(games)} ids, e.g. pong, breakout"
            )
            raise ValueError(f"unknown game {game!r}: {hint}")
        if not isinstance(frameskip, int) or not 1 <= frameskip <= 16:
            raise ValueError(f"frameskip must be an integer from 1 to 16, got {frameskip!r}")
        if not isinstance(repeat_action_probability, (int, float)) or not 0 <= repeat_action_probability <= 1:
            raise ValueError(f"repeat_action_probability must be from 0 to 1, got {repeat_action_probability!r}")
        if obs_type not in ("rgb", "grayscale"):
            raise ValueError(f"obs_type must be rgb or grayscale, got {obs_type!r}")
        if not isinstance(max_episode_frames, int) or max_episode_frames < 1:
            raise ValueError(f"max_episode_frames must be a positive integer, got {max_episode_frames!r}")
        if seed is not None:
            self._rng = random.Random(seed)
        self._seed = seed
        ale = ALEInterface()
        ale.setInt("random_seed", self._rng.randrange(2**31))
        ale.setFloat("repeat_action_probability", float(repeat_action_probability))
        ale.setInt("frame_skip", 1)  # frames are skipped here, so the reward of each is counted
        ale.loadROM(roms.get_rom_path(game))
        if mode is not None:
            if mode not in ale.getAvailableModes():
                raise ValueError(f"{game} has no mode {mode}; its modes are {list(ale.getAvailableModes())}")
            ale.setMode(mode)
        if difficulty is not None:
            if difficulty not in ale.getAvailableDifficulties():
                raise ValueError(
                    f"{game} has no difficulty {difficulty}; its difficulties are {list(ale.getAvailableDifficulties())}"
                )
            ale.setDifficulty(difficulty)
        ale.reset_game()
        self._ale = ale
        self._loaded = (game, float(repeat_action_probability))
        self._episode_id = episode_id or str(uuid.uuid4())
        self._game, self._frameskip, self._sticky, self._obs_type = (
            game,
            frameskip,
            float(repeat_action_probability),
            obs_type,
        )
        self._max_frames = max_episode_frames
        self._actions = list(ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet())
        self._score = 0.0
        self._steps = 0
        self._done = False
        return self._observe(None, truncated=False)

    def step(self, action: AtariAction, timeout_s: float | None = None, **kwargs: Any) -> AtariObservation:
        """Apply the action for `frameskip` frames.

        Raises:
            ValueError: the index is not one of `legal_actions`.
            RuntimeError: no episode is running (call reset).
        """
        ale = self._ale
        if ale is None or self._done:
            raise RuntimeError("no episode is running (none started, or the game is over); call reset()")
        if action.action >= len(self._actions):
            raise ValueError(
                f"action {action.action} is out of range: this game has {len(self._actions)} actions (0-{len(self._actions) - 1})"
            )
        button = self._actions[action.action]
        reward = 0.0
        for _ in range(self._frameskip):
            reward += ale.act(button)
            if ale.game_over():
                break
        self._score += reward
        self._steps += 1
        truncated = not ale.game_over() and ale.getEpisodeFrameNumber() >= self._max_frames
        self._done = ale.game_over() or truncated
        return self._observe(reward, truncated=truncated)

    # -- snapshots (the "fork" extension): ALE's own state cloning ----------------------------------

    _PLAIN = ("_rng", "_episode_id", "_seed", "_game", "_frameskip", "_sticky", "_obs_type", "_max_frames")

    def snapshot(self) -> dict[str, Any]:
        """The emulator's state (RAM, CPU, frame counters and its RNG, so sticky actions repeat
        the same way) with the episode's bookkeeping."""
        ale = self._ale
        return {
            **{name: copy.deepcopy(getattr(self, name)) for name in self._PLAIN},
            "actions": list(self._actions),
            "score": self._score,
            "steps": self._steps,
            "done": self._done,
            "ale": None if ale is None else ale.cloneState(include_rng=True),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Put a snapshot back; a fresh instance (a fork's child) first loads the same ROM."""
        for name in self._PLAIN:
            setattr(self, name, copy.deepcopy(state[name]))
        self._actions, self._score, self._steps, self._done = (
            list(state["actions"]),
            state["score"],
            state["steps"],
            state["done"],
        )
        saved = state["ale"]
        if saved is None:
            self._ale = None
            return
        ale = self._ale
        if ale is None or self._loaded != (self._game, self._sticky):
            _give_spare(self._loaded, ale)
            ale = _take_spare((self._game, self._sticky))
        if ale is None:
            ale = ALEInterface()
            ale.setFloat("repeat_action_probability", self._sticky)
            ale.setInt("frame_skip", 1)
            ale.loadROM(roms.get_rom_path(self._game))
        self._ale = ale
        self._loaded = (self._game, self._sticky)
        ale.restoreState(saved)

    def close(self) -> None:
        """Hand the emulator to later restores (see `_spares`)."""
        ale, self._ale = self._ale, None
        _give_spare(self._loaded, ale)

    @property
    def state(self) -> AtariState:
        return AtariState(
            episode_id=self._episode_id,
            step_count=self._steps,
            game=self._game,
            frameskip=self._frameskip,
            repeat_action_probability=self._sticky,
            obs_type=self._obs_type,
            score=self._score,
            seed=self._seed,
        )

    def render(self) -> tuple[str, bytes] | None:
        """The screen as a PNG (None before the first reset)."""
        if self._ale is None:
            return None
        return "image/png", encode_png(self._ale.getScreenRGB())

    def _observe(self, reward: float | None, truncated: bool) -> AtariObservation:
        ale = self._ale
        assert ale is not None
        screen = ale.getScreenRGB() if self._obs_type == "rgb" else ale.getScreenGrayscale()
        return AtariObservation(
            image=base64.b64encode(encode_png(screen)).decode("ascii"),
            image_shape=list(screen.shape) if screen.ndim == 3 else [*screen.shape, 1],
            ram=ale.getRAM().tolist(),
            lives=ale.lives(),
            legal_actions=[a.name for a in self._actions],
            episode_frame_number=ale.getEpisodeFrameNumber(),
            truncated=truncated,
            game=self._game,
            reward=reward,
            done=self._done,
        )
