"""The `openenv` command line (see `openenv.cli.main`)."""

from __future__ import annotations

__all__: list[str] = []
