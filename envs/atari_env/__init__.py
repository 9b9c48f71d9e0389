"""atari_env: Atari 2600 games through the Arcade Learning Environment (ale-py, bundled ROMs)."""

from .client import AtariEnv
from .models import AtariAction, AtariObservation, AtariState, decode_png

__all__ = ["AtariAction", "AtariEnv", "AtariObservation", "AtariState", "decode_png"]
