"""A Unix-socket relay: bytes both ways between a socket of ours and a real one (the Docker engine's).

Tests point DOCKER_HOST at the relay's socket; the engine "is down" while the relay is stopped (no
one listens there) and "comes back" when it starts. Everything behind it is the real engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

__all__ = ["SocketRelay"]


class SocketRelay:
    """Listens on `path` and relays each connection to `target` (both Unix sockets)."""

    def __init__(self, path: Path, target: str = "/var/run/docker.sock") -> None:
        self.path, self.target = path, target
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            asyncio.run(self._serve(ready))

        self._thread = threading.Thread(target=run, name="socket-relay", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"the relay on {self.path} did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        self._thread = None

    async def _serve(self, ready: threading.Event) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        server = await asyncio.start_unix_server(self._relay, path=str(self.path))
        ready.set()
        async with server:
            await self._stop.wait()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
                if dst.can_write_eof():
                    dst.write_eof()  # a half-close goes through as one

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()
