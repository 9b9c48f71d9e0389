"""The Atari environment's models: an action index in; the screen (PNG), RAM, lives and score out.

`AtariObservation.frame()` turns the PNG back into a numpy array (numpy needed only for that).
"""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

from pydantic import Field

from openenv import Action, Observation, State

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class AtariAction(Action):
    """Press a button combination: an index into the observation's `legal_actions`."""

    action: int = Field(ge=0, le=17, description="Index into legal_actions (e.g. 0 = NOOP).")


class AtariObservation(Observation):
    """The screen after the step, the console's RAM, and the game's counters.

    Reward: the points scored during the step's frames (frame skip).
    """

    image: str = Field(default="", description="The screen as a base64-encoded PNG (RGB or grayscale).")
    image_shape: list[int] = Field(default_factory=list, description="[height, width, channels] of the screen.")
    ram: list[int] = Field(default_factory=list, description="The 128 bytes of the console's RAM.")
    lives: int = Field(default=0, description="Lives left.")
    legal_actions: list[str] = Field(default_factory=list, description="Names of the actions, in index order.")
    episode_frame_number: int = Field(default=0, description="Frames emulated in this episode.")
    truncated: bool = Field(default=False, description="The episode was cut off at max_episode_frames.")
    game: str = Field(default="", description="The ROM being played.")

    def frame(self) -> Any:
        """The screen as a numpy uint8 array of `image_shape` (needs numpy).

        Raises:
            ValueError: the image is not a PNG as this environment writes them.
        """
        import numpy as np

        pixels, shape = decode_png(base64.b64decode(self.image))
        return np.frombuffer(pixels, dtype=np.uint8).reshape(shape)


class AtariState(State):
    """Episode id, step count and the emulator's settings."""

    game: str = ""
    frameskip: int = 4
    repeat_action_probability: float = 0.25
    obs_type: str = "rgb"
    score: float = 0.0
    seed: int | None = None


def decode_png(data: bytes) -> tuple[bytes, tuple[int, ...]]:
    """Pixels and [h, w(, c)] shape of an 8-bit PNG whose rows are all unfiltered (filter 0),
    which is how this environment writes them.

    Raises:
        ValueError: not such a PNG.
    """
    if not data.startswith(_PNG_SIGNATURE):
        raise ValueError("not a PNG")
    pos, header, idat = len(_PNG_SIGNATURE), b"", []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    channels = {0: 1, 2: 3}.get(color)
    if depth != 8 or channels is None:
        raise ValueError("only 8-bit RGB or grayscale PNGs are supported")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels + 1
    if len(raw) != stride * height or any(raw[r * stride] != 0 for r in range(height)):
        raise ValueError("PNG rows use a filter other than 0")
    pixels = b"".join(raw[r * stride + 1 : (r + 1) * stride] for r in range(height))
    return pixels, (height, width, channels) if channels == 3 else (height, width)
