"""One WebSocket connection to an env server, as a request/reply pipe.

The protocol answers every request frame with exactly one reply frame, in order, so replies are
matched to requests by a FIFO of futures: no lock, no per-request task, and several requests can
be in flight at once. Built on picows (a Cython WebSocket implementation) because this path runs
once per step of every rollout.

A reply is capped as a whole (`max_message_bytes`), not only frame by frame: a server that
fragments a huge reply into many continuation frames is cut off once their sum passes the cap,
so the client's memory never grows with what a server sends.

Connects to one server from one event loop go through a gate: at most `CONNECTS_IN_FLIGHT`
handshakes at a time, the rest wait their turn. Thousands of sessions opened at once would
otherwise overflow the server's accept queue, and each dropped SYN costs a 1, 3, 7 s retransmit,
so most handshakes ran past their timeout though the server was merely busy. `connect_timeout_s`
bounds each handshake; a connect waiting its turn fails only once no handshake to that server has
succeeded for that long (a dead server does not keep the queue waiting forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections import deque
from time import monotonic
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from picows import WSCloseCode, WSError, WSFrame, WSHandshakeError, WSListener, WSMsgType, WSTransport, ws_connect

from openenv.errors import ConfigurationError, EnvConnectionError, EnvDisconnectedError, EnvTimeoutError
from openenv.protocol import PROTOCOL_HEADER

__all__ = ["CONNECTS_IN_FLIGHT", "Connection", "ws_url_for"]

# How long `Connection.close` waits for the server's side of the closing handshake before it lets the
# connection go (closing is best-effort: a server that never answers does not hold the caller).
CLOSE_HANDSHAKE_S = 2.0

_TEXT = WSMsgType.TEXT
_BINARY = WSMsgType.BINARY
_CONTINUATION = WSMsgType.CONTINUATION
_CLOSE = WSMsgType.CLOSE
_TOO_BIG = 1009  # WebSocket close code: a message over the receiver's limit
CONNECTS_IN_FLIGHT = 256  # handshakes one event loop runs at once to one server; more connects queue


class _Gate:
    """The connects of one event loop to one server (host:port): `CONNECTS_IN_FLIGHT` at a time, first come first served."""

    __slots__ = ("free", "progress", "queue")

    def __init__(self) -> None:
        self.free = CONNECTS_IN_FLIGHT
        self.queue: deque[asyncio.Future[None]] = deque()
        self.progress = monotonic()  # when a handshake last succeeded (or the gate was made)

    async def enter(self, url: str, timeout_s: float) -> None:
        """Take a slot; waits while the others progress.

        Raises:
            EnvTimeoutError: no handshake to this server succeeded for `timeout_s` while this one waited.
        """
        if self.free > 0 and not self.queue:
            self.free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(turn)
        try:
            while not turn.done():
                try:
                    await asyncio.wait_for(asyncio.shield(turn), timeout_s)
                except TimeoutError:
                    if not turn.done() and monotonic() - self.progress >= timeout_s:
                        raise EnvTimeoutError(
                            f"no WebSocket handshake from {url} within {timeout_s:g}s: this connect waited its turn behind "
                            f"{CONNECTS_IN_FLIGHT} others and none of them got through; is the server up?",
                            url=url,
                        ) from None
        except BaseException:
            if turn.done() and not turn.cancelled():
                self.leave(False)  # the slot came as we gave up: hand it on
            else:
                turn.cancel()
            raise

    def leave(self, succeeded: bool) -> None:
        """Give the slot back (to the next in line); `succeeded`: the handshake got through."""
        if succeeded:
            self.progress = monotonic()
        while self.queue:
            turn = self.queue.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Gate]] = weakref.WeakKeyDictionary()


def _gate(url: str) -> _Gate:
    per_loop = _gates.setdefault(asyncio.get_running_loop(), {})
    host = urlsplit(url).netloc
    gate = per_loop.get(host)
    if gate is None:
        gate = per_loop[host] = _Gate()
    return gate


def ws_url_for(base_url: str) -> str:
    """`http(s)://host[/prefix]` or `ws(s)://...` → the `/ws` endpoint's URL."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ConfigurationError("base_url must be a URL such as 'http://127.0.0.1:8000'")
    parts = urlsplit(base_url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise ConfigurationError(f"{base_url!r} is not an http(s):// or ws(s):// URL, e.g. 'http://127.0.0.1:8000'")
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


class _Listener(WSListener):
    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn
        self.parts: list[bytes] | None = None
        self.size = 0  # bytes of the fragmented message so far

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if self.conn._too_big:
            return  # frames still buffered after a reply over the cap: the connection is closing
        kind = frame.msg_type
        if kind is _TEXT or kind is _BINARY:
            if frame.payload_size > self.conn.max_message_bytes:
                # picows reports an over-size frame and closes, but may hand it over all the same
                self.parts = None
                self.conn._too_large(transport)
                return
            if frame.fin:
                self.conn._deliver(frame.get_payload_as_bytes())
            else:
                self.parts, self.size = [frame.get_payload_as_bytes()], frame.payload_size
        elif kind is _CONTINUATION:
            if self.parts is not None:
                self.size += frame.payload_size
                if self.size > self.conn.max_message_bytes:
                    self.parts = None  # dropped before the next frame is read: memory stays at the cap
                    self.conn._too_large(transport)
                    return
                self.parts.append(frame.get_payload_as_bytes())
                if frame.fin:
                    payload, self.parts = b"".join(self.parts), None
                    self.conn._deliver(payload)
        elif kind is _CLOSE:
            code: Any = frame.get_close_code()
            self.conn._close_info = (int(getattr(code, "value", code)), frame.get_close_reason())
            transport.send_close(WSCloseCode.OK)
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        sent = transport.close_handshake.sent if transport.close_handshake is not None else None
        if sent is not None and sent.code == WSCloseCode.MESSAGE_TOO_BIG and not self.conn._too_big:
            # one frame over the cap: picows refused it and closed the connection
            self.conn._too_big, self.conn._error = True, self.conn._too_large_error()
        self.conn._on_disconnected()


class Connection:
    """A connected WebSocket with request/reply matching. Create with `Connection.open`."""

    def __init__(self, url: str, max_message_bytes: int = 100 << 20) -> None:
        self.url = url
        self.max_message_bytes = max_message_bytes
        self.transport: WSTransport | None = None
        self.extensions: frozenset[str] = frozenset()
        self.is_ours = False
        self.protocol_version: int | None = None  # what the server announced (None: an upstream server)
        self._pending: deque[asyncio.Future[bytes]] = deque()
        self._early: deque[bytes] = deque()
        self._close_info: tuple[int, str] | None = None
        self._error: EnvDisconnectedError | None = None
        self._too_big = False
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, url: str, *, headers: dict[str, str], timeout_s: float, max_message_bytes: int) -> Connection:
        """Connect and handshake.

        Raises:
            EnvConnectionError: refused, unreachable, or the handshake was rejected.
            EnvTimeoutError: no handshake within `timeout_s`.
        """
        conn = cls(url, max_message_bytes)
        ssl_context = ssl.create_default_context() if url.startswith("wss://") else None
        gate = _gate(url)
        await gate.enter(url, timeout_s)
        succeeded = False
        try:
            transport, _ = await asyncio.wait_for(
                ws_connect(
                    lambda: _Listener(conn),
                    url,
                    ssl_context=ssl_context,
                    websocket_handshake_timeout=timeout_s,
                    enable_auto_pong=True,
                    max_frame_size=max_message_bytes,
                    extra_headers=headers or None,
                    logger_name="openenv.client",
                ),
                timeout_s,
            )
        except TimeoutError:
            raise EnvTimeoutError(
                f"no WebSocket handshake from {url} within {timeout_s:g}s; is the server up?", url=url
            ) from None
        except WSHandshakeError as exc:
            status = getattr(getattr(exc, "response", None), "status", None)
            has_token = any(k.lower() == "authorization" for k in headers)
            hint = {
                401: "the server wants a token: pass token=... or set HF_TOKEN",
                403: "the token was refused, or is this not an OpenEnv server's root URL?"
                if has_token
                else "is this an OpenEnv server, and is the URL its root? (a private Space also needs token=...)",
                404: "no /ws endpoint here: is this an OpenEnv server, and is the URL its root?",
            }.get(int(status) if status else 0, "is this an OpenEnv server?")
            raise EnvConnectionError(f"WebSocket handshake with {url} failed ({exc}); {hint}", url=url) from None
        except (OSError, WSError) as exc:
            raise EnvConnectionError(f"cannot connect to {url}: {exc}; is the server running?", url=url) from None
        else:
            succeeded = True
        finally:
            gate.leave(succeeded)
        gone = transport.is_disconnected or conn._error is not None
        if transport.response is None or (gone and not conn._early):
            # The peer went away mid-handshake (e.g. a server being killed still had its
            # listening socket open for a moment); picows can hand back a dead transport then.
            transport.disconnect(graceful=False)
            raise EnvConnectionError(
                f"the connection to {url} was lost during the handshake; is the server running?", url=url
            )
        conn.transport = transport
        announced = transport.response.headers.get(PROTOCOL_HEADER)
        if announced:
            conn.is_ours = True
            version, _, ext = announced.partition("ext=")
            with contextlib.suppress(ValueError):  # a malformed version is unknown, as an upstream server's
                conn.protocol_version = int(version.strip().rstrip(";").strip())
            conn.extensions = frozenset(e.strip() for e in ext.split(",") if e.strip())
        return conn

    @property
    def closed(self) -> bool:
        return self._error is not None or self.transport is None

    async def call(self, frame: bytes, timeout_s: float | None) -> bytes:
        """Send one frame and wait for its reply's bytes.

        Raises:
            EnvDisconnectedError: the connection is (or becomes) closed.
            EnvTimeoutError: no reply within `timeout_s`; the session stays open and the late
                reply is discarded when it comes.
        """
        if self._early:  # a frame the server sent before any request (e.g. CAPACITY_REACHED)
            return self._early.popleft()
        if self._error is not None:
            raise self._error
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self._pending.append(fut)
        self.transport.send(_TEXT, frame)  # type: ignore[union-attr]
        if timeout_s is None:
            return await fut
        handle = self._loop.call_later(timeout_s, _expire, fut, self.url, timeout_s)
        try:
            return await fut
        finally:
            handle.cancel()

    def send_only(self, frame: bytes) -> None:
        if self._error is None and self.transport is not None:
            self.transport.send(_TEXT, frame)

    def _deliver(self, payload: bytes) -> None:
        if self._pending:
            fut = self._pending.popleft()
            if not fut.done():  # done: its caller timed out, and this late reply is dropped
                fut.set_result(payload)
        else:
            self._early.append(payload)

    def _too_large_error(self) -> EnvDisconnectedError:
        limit = self.max_message_bytes / (1 << 20)
        return EnvDisconnectedError(
            f"a reply from the server was larger than this client's limit of {limit:g} MB (max_message_size_mb), so the "
            f"connection was closed; raise max_message_size_mb if the environment's replies are really this large [{self.url}]",
            url=self.url,
            close_code=_TOO_BIG,
        )

    def _too_large(self, transport: WSTransport) -> None:
        """A fragmented reply passed the cap: fail what waits, and close (the rest of the reply is never read)."""
        self._too_big, self._error = True, self._too_large_error()
        with contextlib.suppress(OSError, WSError, RuntimeError):  # already closing: the disconnect below still ends it
            transport.send_close(WSCloseCode.MESSAGE_TOO_BIG, b"reply over the client's max_message_size_mb")
        transport.disconnect(graceful=False)
        self._on_disconnected()

    def _on_disconnected(self) -> None:
        if self._too_big and self._error is not None:
            error = self._error  # the reason stays: the reply was over the cap
        elif self._close_info is not None:
            code, reason = self._close_info
            text = f"the server closed the session (code {code}{': ' + reason if reason else ''})"
            error = EnvDisconnectedError(f"{text} [{self.url}]", url=self.url, close_code=code)
        else:
            text = "the connection to the server was lost (server crashed or network failed)"
            error = EnvDisconnectedError(f"{text} [{self.url}]", url=self.url)
        self._error = error
        while self._pending:
            fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(error)

    async def close(self) -> None:
        transport, self.transport = self.transport, None
        if transport is None:
            return
        if self._error is None:
            self._error = EnvDisconnectedError(
                f"the client closed this connection [{self.url}]", url=self.url, close_code=1000
            )
        try:
            transport.send_close(WSCloseCode.OK)
            transport.disconnect()
            await asyncio.wait_for(transport.wait_disconnected(), CLOSE_HANDSHAKE_S)
        except (OSError, TimeoutError, WSError, RuntimeError):
            pass  # already gone: closing is best-effort by nature


def _expire(fut: asyncio.Future[bytes], url: str, timeout_s: float) -> None:
    if not fut.done():
        fut.set_exception(
            EnvTimeoutError(
                f"no reply from {url} within {timeout_s:g}s (message_timeout_s); the session is still open", url=url
            )
        )
