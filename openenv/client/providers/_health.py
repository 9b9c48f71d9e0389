"""Waiting for an env server to answer `GET /health` with 200: fast polls, then backoff.

A raw HTTP/1.1 request over asyncio streams rather than an HTTP library: the client's base
install has none, and a readiness probe needs only the status line (and, for a 503 from one of
our servers, the reason in the JSON body). Polls start 5 ms apart (a server that is ready soon
is seen soon) and back off to 20 ms; after 10 s to 100 ms (upstream images take seconds to import
their server), and after a minute to 0.5 s, so a slow build or a waking Space is not hammered.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from openenv.errors import ConfigurationError, ProviderStartError
from openenv.protocol import loads

__all__ = ["PAYMENT_REQUIRED", "PaymentRequiredError", "probe", "wait_healthy"]

PAYMENT_REQUIRED = 402  # what a Hugging Face Space answers when its namespace must pay to run it

_FIRST_DELAY_S = 0.005
# (seconds since the wait began, longest interval from then on)
_CAPS = ((10.0, 0.02), (60.0, 0.1), (float("inf"), 0.5))
_ALIVE_EVERY_S = 0.25
_MAX_REPLY = 1 << 16
# Waits in progress in this process. A pool waits for dozens of servers at once, and every poll
# costs CPU (the engine's port proxy, the liveness check) that the starting servers need, so
# the intervals stretch with the number of waits: the polls per second stay about constant.
_waiting = 0


class PaymentRequiredError(ProviderStartError):
    """The server answered 402 Payment Required: no wait will change that (a Space whose namespace must
    pay to run it answers so to everyone)."""


def _stretch() -> float:
    return max(1.0, _waiting / 2)


async def probe(
    url: str, path: str = "/health", *, timeout_s: float = 2.0, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One `GET url+path`; returns (status, body).

    Raises:
        OSError: the connection failed or was reset (the server is not up yet).
        TimeoutError: no full reply within `timeout_s`.
        ConfigurationError: `url` is not http(s).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{url!r} is not an http(s) URL")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    target = (parts.path.rstrip("/") + path) or "/"
    lines = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close", "User-Agent: openenv-client"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _exchange() -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection(
            parts.hostname, port, ssl=ssl.create_default_context() if secure else None
        )
        try:
            writer.write(request)
            raw = b""
            while _short(raw) and len(raw) < _MAX_REPLY:
                more = await reader.read(_MAX_REPLY)
                if not more:
                    break
                raw += more
        finally:
            writer.close()
        if not raw.startswith(b"HTTP/"):
            raise ConnectionResetError("no HTTP reply (the port is open but nothing answers yet)")
        head, _, body = raw.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), body

    return await asyncio.wait_for(_exchange(), timeout_s)


def _cap(elapsed: float) -> float:
    return next(cap for until, cap in _CAPS if elapsed < until)


def _short(raw: bytes) -> bool:
    """Whether a reply with a Content-Length has not fully arrived yet."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return True
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) < int(value.strip())
    return False


def _unhealthy_reason(body: bytes) -> str | None:
    try:
        data = loads(body)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("status") == "unhealthy":
        return str(data.get("error") or "the environment could not be built")
    return None


async def wait_healthy(
    url: str,
    *,
    timeout_s: float,
    exit_reason: Callable[[], Awaitable[str | None]] | None = None,
    headers: dict[str, str] | None = None,
    path: str = "/health",
) -> float:
    """Poll `url + path` until it answers 200; returns the seconds waited.

    Args:
        url: the server's base URL.
        timeout_s: give up after this long.
        exit_reason: awaited every quarter second; a non-None answer (the server exited, the
            container died) ends the wait at once with that reason.
        headers: sent with every probe (e.g. a bearer token for a private Space).

    Raises:
        PaymentRequiredError: it answered 402 Payment Required (at once: waiting changes nothing).
        ProviderStartError: the server exited, reported itself unhealthy, or did not answer
            200 within `timeout_s`.
    """
    global _waiting
    _waiting += 1
    try:
        return await _wait(url, timeout_s, exit_reason, headers, path)
    finally:
        _waiting -= 1


async def _wait(
    url: str,
    timeout_s: float,
    exit_reason: Callable[[], Awaitable[str | None]] | None,
    headers: dict[str, str] | None,
    path: str,
) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + timeout_s
    next_alive = start + _ALIVE_EVERY_S
    delay = _FIRST_DELAY_S
    last = "no answer yet"
    while True:
        try:
            status, body = await probe(url, path, timeout_s=min(5.0, max(0.5, deadline - loop.time())), headers=headers)
            if status == 200:
                return loop.time() - start
            if status == PAYMENT_REQUIRED:
                raise PaymentRequiredError(f"{url} answered 402 Payment Required to {path}", url=url)
            reason = _unhealthy_reason(body) if status == 503 else None
            if reason is not None:
                raise ProviderStartError(f"the env server at {url} is up but unhealthy: {reason}", url=url)
            last = f"HTTP {status} from {path}"
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        now = loop.time()
        if exit_reason is not None and now >= next_alive:
            next_alive = now + _ALIVE_EVERY_S * _stretch()
            gone = await exit_reason()
            if gone is not None:
                raise ProviderStartError(f"the env server for {url} stopped before it was ready: {gone}", url=url)
        if now >= deadline:
            raise ProviderStartError(
                f"the env server at {url} did not answer {path} with 200 within {timeout_s:g}s (last: {last}); "
                "raise startup_timeout_s if it is slow to start, or read its logs",
                url=url,
            )
        await asyncio.sleep(min(delay, max(0.0, deadline - now)))
        delay = min(delay * 1.5, _cap(now - start) * _stretch())
