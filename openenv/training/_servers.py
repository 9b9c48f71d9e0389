"""Which env server a new session goes to: the least busy healthy one; lost servers rest a while."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from openenv.errors import ConfigurationError

__all__ = ["ServerSet", "urls_of"]

_COOLDOWN_S = 1.0  # first rest of a server that failed; doubles on each further failure
_MAX_COOLDOWN_S = 30.0


def urls_of(env: Any) -> tuple[list[str], dict[str, Any]]:
    """The base URLs (and client options) of `env`: a URL, a list of URLs, or a pool.

    A pool is anything with a `urls` attribute (an `EnvPool` from `openenv.client.pool`); its
    `client_options` and `client_cls` are reused when present.

    Raises:
        ConfigurationError: `env` is none of these.
    """
    options: dict[str, Any] = {}
    if isinstance(env, str):
        urls = [env]
    elif hasattr(env, "urls"):
        urls = list(env.urls)
        if getattr(env, "client_options", None):
            options["client_options"] = dict(env.client_options)
        if getattr(env, "client_cls", None) is not None:
            options["client_cls"] = env.client_cls
    elif isinstance(env, Sequence):
        urls = list(env)
    else:
        raise ConfigurationError(
            f"env must be a server URL, a list of URLs, or a pool with .urls; got {type(env).__name__}"
        )
    bad = [u for u in urls if not isinstance(u, str) or "://" not in u]
    if not urls or bad:
        raise ConfigurationError(
            f"env needs at least one server URL such as 'http://127.0.0.1:8000'; got {bad or urls!r}. "
            "Start a server first (`openenv serve`, a Docker container, or an EnvPool) and pass its URL."
        )
    return urls, options


class ServerSet:
    """Load and health of the servers of one run, shared by its workers.

    With `source` (a pool's current URLs), the list follows the pool: servers it replaced leave,
    their replacements join.
    """

    def __init__(self, urls: Sequence[str], source: Callable[[], Sequence[str]] | None = None) -> None:
        self.urls = list(dict.fromkeys(urls))
        self.active = dict.fromkeys(self.urls, 0)
        self._down_until = dict.fromkeys(self.urls, 0.0)
        self._failures = dict.fromkeys(self.urls, 0)
        self._source = source

    def _follow(self) -> None:
        current = list(dict.fromkeys(self._source())) if self._source is not None else None
        if not current or current == self.urls:
            return  # a pool with no server left keeps the old list: sessions fail and are retried
        for url in current:
            if url not in self.active:
                self.active[url] = 0
                self._down_until[url] = 0.0
                self._failures[url] = 0
        self.urls = current

    def pick(self) -> str:
        """The healthy server with the fewest sessions; when all rest, the one back soonest."""
        self._follow()
        now = time.monotonic()
        best: str | None = None
        for url in self.urls:
            if self._down_until[url] <= now and (best is None or self.active[url] < self.active[best]):
                best = url
        if best is None:
            best = min(self.urls, key=self._down_until.__getitem__)
        self.active[best] += 1
        return best

    def release(self, url: str) -> None:
        self.active[url] -= 1

    def wait_s(self, url: str) -> float:
        """How long `url` still rests (0 when it is healthy)."""
        return max(0.0, self._down_until[url] - time.monotonic())

    def mark_down(self, url: str) -> None:
        """`url` lost a session or refused one: route around it for a while (longer each time).

        The sessions that one outage breaks all report it; only the first one lengthens the rest.
        """
        if self._down_until[url] > time.monotonic():
            return
        self._failures[url] += 1
        rest = min(_MAX_COOLDOWN_S, _COOLDOWN_S * 2 ** (self._failures[url] - 1))
        self._down_until[url] = max(self._down_until[url], time.monotonic() + rest)

    def mark_up(self, url: str) -> None:
        """A session on `url` connected: it is healthy again."""
        if self._failures[url]:
            self._failures[url] = 0
            self._down_until[url] = 0.0

    @property
    def healthy(self) -> list[str]:
        now = time.monotonic()
        return [u for u in self.urls if self._down_until[u] <= now]
