"""A round-robin TCP proxy on 127.0.0.1 in a thread, in front of several servers (as a load
balancer stands in front of the Hub's API processes). Each connection goes to the next backend
that accepts it; a backend that refuses (its process is gone) is skipped."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

__all__ = ["RoundRobinProxy", "round_robin_proxy"]


class RoundRobinProxy:
    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.served: Counter[int] = Counter()  # connections per backend port
        self.port = 0
        self._next = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="test-rr-proxy")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        # Connections still piped when the proxy stops (clients keep theirs alive) end here, and
        # the loop is closed: left pending, their tasks and sockets were destroyed later by the
        # garbage collector, in whatever test ran then ("Task was destroyed but it is pending!",
        # unraisable exception warnings that failed that test).
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # This connection's own order, from the next backend round: other connections advance the
        # shared counter while this one waits on a refusal, and must not make it skip a live backend.
        first = self._next
        self._next += 1
        for offset in range(len(self.backends)):
            host, port = self.backends[(first + offset) % len(self.backends)]
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                continue
            self.served[port] += 1
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        writer.close()  # no backend left

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(10)
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except OSError:  # either side went away (a backend killed mid-request): end both
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.close()


@contextlib.contextmanager
def round_robin_proxy(backends: list[tuple[str, int]]) -> Iterator[RoundRobinProxy]:
    proxy = RoundRobinProxy(backends)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
