"""Reading an HTTP reply within a size and a time: what a hostile server sends never grows the reader."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["read_within"]

_CHUNK = 1 << 16


def read_within(reply: Any, limit: int, ends: float, late: str) -> bytes | None:
    """The body of a `urllib` reply (or `HTTPError`), read in chunks; None when it is, or says in
    its Content-Length that it is, over `limit` bytes.

    Raises:
        TimeoutError: with the message `late`, once `time.monotonic()` passes `ends` (a deadline
            for the whole body, not per read: a server that drips a byte at a time is cut off too).
    """
    declared = reply.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    while chunk := reply.read1(_CHUNK):
        body += chunk
        if len(body) > limit:
            return None
        if time.monotonic() > ends:
            raise TimeoutError(late)
    return bytes(body)
