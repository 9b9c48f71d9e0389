"""One WebSocket connection to an env server, as a request/reply pipe.

The protocol answers every request frame with exactly one reply frame, in order, so replies are
matched to requests by a FIFO of futures: no lock, no per-request task, and several requests can
be in flight at once. Built on picows (a Cython WebSocket implementation) because this path runs
once per step of every rollout.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from urllib.parse import urlsplit, urlunsplit

from picows import WSCloseCode, WSError, WSFrame, WSHandshakeError, WSListener, WSMsgType, WSTransport, ws_connect

from openenv.errors import ConfigurationError, EnvConnectionError, EnvDisconnectedError, EnvTimeoutError
from openenv.protocol import PROTOCOL_HEADER

__all__ = ["Connection", "ws_url_for"]

_TEXT = WSMsgType.TEXT
_BINARY = WSMsgType.BINARY
_CONTINUATION = WSMsgType.CONTINUATION
_CLOSE = WSMsgType.CLOSE


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

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        kind = frame.msg_type
        if kind is _TEXT or kind is _BINARY:
            if frame.fin:
                self.conn._deliver(frame.get_payload_as_bytes())
            else:
                self.parts = [frame.get_payload_as_bytes()]
        elif kind is _CONTINUATION:
            if self.parts is not None:
                self.parts.append(frame.get_payload_as_bytes())
                if frame.fin:
                    payload, self.parts = b"".join(self.parts), None
                    self.conn._deliver(payload)
        elif kind is _CLOSE:
            code = frame.get_close_code()
            self.conn._close_info = (int(code.value) if hasattr(code, "value") else int(code), frame.get_close_reason())
            transport.send_close(WSCloseCode.OK)
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.conn._on_disconnected()


class Connection:
    """A connected WebSocket with request/reply matching. Create with `Connection.open`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.transport: WSTransport | None = None
        self.extensions: frozenset[str] = frozenset()
        self.is_ours = False
        self._pending: deque[asyncio.Future[bytes]] = deque()
        self._early: deque[bytes] = deque()
        self._close_info: tuple[int, str] | None = None
        self._error: EnvDisconnectedError | None = None
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(
        cls, url: str, *, headers: dict[str, str], timeout_s: float, max_message_bytes: int
    ) -> Connection:
        """Connect and handshake.

        Raises:
            EnvConnectionError: refused, unreachable, or the handshake was rejected.
            EnvTimeoutError: no handshake within `timeout_s`.
        """
        conn = cls(url)
        ssl_context = ssl.create_default_context() if url.startswith("wss://") else None
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
            raise EnvTimeoutError(f"no WebSocket handshake from {url} within {timeout_s:g}s; is the server up?", url=url) from None
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
        gone = transport.is_disconnected or conn._error is not None
        if transport.response is None or (gone and not conn._early):
            # The peer went away mid-handshake (e.g. a server being killed still had its
            # listening socket open for a moment); picows can hand back a dead transport then.
            transport.disconnect(graceful=False)
            raise EnvConnectionError(f"the connection to {url} was lost during the handshake; is the server running?", url=url)
        conn.transport = transport
        announced = transport.response.headers.get(PROTOCOL_HEADER)
        if announced:
            conn.is_ours = True
            _, _, ext = announced.partition("ext=")
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
        fut = self._loop.create_future()
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

    def _on_disconnected(self) -> None:
        if self._close_info is not None:
            code, reason = self._close_info
            text = f"the server closed the session (code {code}{': ' + reason if reason else ''})"
        else:
            code, text = None, "the connection to the server was lost (server crashed or network failed)"
        self._error = EnvDisconnectedError(f"{text} [{self.url}]", url=self.url, close_code=code)
        while self._pending:
            fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(self._error)

    async def close(self) -> None:
        transport, self.transport = self.transport, None
        if transport is None:
            return
        if self._error is None:
            self._error = EnvDisconnectedError(f"the client closed this connection [{self.url}]", url=self.url, close_code=1000)
        try:
            transport.send_close(WSCloseCode.OK)
            transport.disconnect()
            await asyncio.wait_for(transport.wait_disconnected(), 2.0)
        except (OSError, TimeoutError, WSError, RuntimeError):
            pass  # already gone: closing is best-effort by nature


def _expire(fut: asyncio.Future[bytes], url: str, timeout_s: float) -> None:
    if not fut.done():
        fut.set_exception(
            EnvTimeoutError(f"no reply from {url} within {timeout_s:g}s (message_timeout_s); the session is still open", url=url)
        )
