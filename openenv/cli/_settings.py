"""What the `openenv` command reads from the process environment (the only place it does).

| variable | meaning |
|---|---|
| OPENENV_DEBUG=1 | print tracebacks of internal errors |
| OPENENV_COLOR=always/never/auto | rich output: forced on, off, or only on a terminal (default auto) |
| NO_COLOR | any value: plain output (https://no-color.org) |
| OPENENV_BASE_IMAGE | default `--base-image` of `openenv build` |
| HF_TOKEN, HF_ENDPOINT | read by huggingface_hub itself for `push` and `fork`; `eval` submits with HF_TOKEN |
| OPENENV_HUB_URL | the OpenEnv Hub service `eval` resolves the env through and submits to |
| OPENAI_API_KEY | default `--api-key` of `openenv eval` (the model endpoint's key) |
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["CliSettings", "cli_settings", "model_api_key"]


@dataclass(frozen=True, slots=True)
class CliSettings:
    debug: bool
    color: str
    base_image: str | None


def cli_settings() -> CliSettings:
    """The CLI's settings, read now (commands are short-lived; nothing to cache)."""
    color = os.environ.get("OPENENV_COLOR", "auto").strip().lower()
    if os.environ.get("NO_COLOR"):
        color = "never"
    return CliSettings(
        debug=os.environ.get("OPENENV_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"),
        color=color if color in ("always", "never", "auto") else "auto",
        base_image=os.environ.get("OPENENV_BASE_IMAGE") or None,
    )


def child_environ(**overrides: str) -> dict[str, str]:
    """This process's environment with `overrides`, for child processes the CLI starts."""
    return {**os.environ, **overrides}


def model_api_key() -> str | None:
    """The model endpoint's key for `openenv eval` when --api-key is not given (OPENAI_API_KEY)."""
    return os.environ.get("OPENAI_API_KEY", "").strip() or None
