"""Publishing environments as Hugging Face Docker Spaces: `push_space` and `fork_space`.

Both go through `huggingface_hub` (1.x or 2.x; see `openenv.spaces._hf`), honour `HF_ENDPOINT`
and `HF_TOKEN`, and return the Space's page and app URLs as the Hub reports them.
"""

from __future__ import annotations

from openenv.spaces._hf import HubRequestError
from openenv.spaces.fork import ForkResult, fork_space, parse_space_id
from openenv.spaces.push import DEFAULT_EXCLUDES, PushResult, push_space, space_readme, stage_folder

__all__ = [
    "DEFAULT_EXCLUDES",
    "ForkResult",
    "HubRequestError",
    "PushResult",
    "fork_space",
    "parse_space_id",
    "push_space",
    "space_readme",
    "stage_folder",
]
