"""What the client reads from the process environment (the only place it does)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["hf_token", "is_hf_host"]

_HF_HOST_SUFFIXES = (".hf.space", ".huggingface.co", ".hf.co")


def hf_token() -> str | None:
    """The user's Hugging Face token: `HF_TOKEN`, else the token file `huggingface-cli login` wrote."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token.strip()
    path = os.environ.get("HF_TOKEN_PATH") or str(Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "token")
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def is_hf_host(url: str) -> bool:
    """Whether `url` points at Hugging Face (where the ambient HF token may be sent)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in ("hf.space", "huggingface.co", "hf.co") or host.endswith(_HF_HOST_SUFFIXES)
