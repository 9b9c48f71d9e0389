"""What the training adapters read from the process environment (the only place they do)."""

from __future__ import annotations

import os

__all__ = ["openai_api_key", "openai_base_url"]


def openai_api_key() -> str | None:
    """`OPENAI_API_KEY`, when set."""
    return os.environ.get("OPENAI_API_KEY") or None


def openai_base_url() -> str | None:
    """`OPENAI_BASE_URL`, when set (e.g. a local vLLM server's `http://127.0.0.1:8000/v1`)."""
    return os.environ.get("OPENAI_BASE_URL") or None
