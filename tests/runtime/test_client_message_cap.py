"""The client caps a reply as a whole: a server that sends a huge reply, in one frame or split into
many continuation frames, gets a clear error naming `max_message_size_mb`, and the client's memory
stays near the cap (the rest of the reply is never read)."""

from __future__ import annotations

import asyncio
import sys
import time
import tracemalloc

import pytest

from openenv import GenericEnvClient
from openenv.errors import EnvDisconnectedError
from tests.support.servers import ROOT, serve_process

_SCRIPT = str(ROOT / "tests" / "support" / "hostile_env_server.py")


@pytest.mark.parametrize(("mode", "megabytes"), [("fragmented", 200), ("big_frame", 8)])
def test_a_reply_over_the_cap_fails_clearly_and_memory_stays_at_the_cap(mode: str, megabytes: int) -> None:
    with serve_process(
        [sys.executable, _SCRIPT], ROOT, env={"HOSTILE_MODE": mode, "HOSTILE_MB": str(megabytes)}
    ) as server:

        async def reset() -> None:
            client = GenericEnvClient(server.url, max_message_size_mb=4, message_timeout_s=30)
            try:
                await client.reset()
            finally:
                await client.close()

        tracemalloc.start()
        started = time.monotonic()
        try:
            with pytest.raises(EnvDisconnectedError) as caught:
                asyncio.run(reset())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    message = str(caught.value)
    assert "larger than this client's limit of 4 MB" in message and "max_message_size_mb" in message, message
    assert caught.value.close_code == 1009
    assert time.monotonic() - started < 10
    assert peak < 16 << 20, f"the client held {peak >> 20} MB for a reply capped at 4 MB"
