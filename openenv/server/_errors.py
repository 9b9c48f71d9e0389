"""`RequestError`: a request failed in a way the client should hear about.

Below both `openenv.server.runtime` (which re-exports it) and `openenv.server.mcp`, which raise
it, so neither module needs the other.
"""

from __future__ import annotations

from typing import Any

from openenv.protocol import ErrorCode

__all__ = ["RequestError"]


class RequestError(Exception):
    """A request failed in a way the client should hear about; the session stays usable."""

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
