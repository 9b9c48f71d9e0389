"""The interface every provider implements: start → base URL, health wait, stop, logs.

A provider runs one env server (or, for replicated services, several replicas of one) somewhere:
a local process, a container, a swarm service, a Kubernetes Deployment. Subclasses implement
four blocking primitives (`_launch`, `_terminate`, `exit_reason`, `logs`); this base class turns
them into a sync and an async API, waits for health without blocking the event loop, and
registers what it started with `lifecycle`, so that it is stopped on `close()`, at interpreter
exit, and found by `lifecycle.gc()` after a crash.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

from openenv.client._loop import run_sync
from openenv.client.providers import lifecycle
from openenv.client.providers._health import wait_healthy
from openenv.errors import ConfigurationError, ProviderStartError

__all__ = ["Provider"]

log = logging.getLogger("openenv.providers")

_LOG_LINES_IN_ERRORS = 30
T = TypeVar("T")

# Engine calls block (docker SDK, subprocess, kubernetes client). They get their own threads: the
# loop's default executor has only cores + 4 workers, and a pool starting 32 containers would
# queue its launches, and the liveness checks of the ones already launched, behind each other.
_executor_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking provider call in the providers' thread pool; returns its result."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="openenv-provider")
    return await asyncio.get_running_loop().run_in_executor(_executor, fn, *args)


class Provider(ABC):
    """Runs an env server and says where it answers.

        provider = ContainerProvider("echo-env:latest")
        url = provider.start()          # or: await provider.astart()
        ...
        provider.stop()                 # or: await provider.astop(); idempotent

    Args:
        startup_timeout_s: how long `start` waits for `GET /health` to answer 200.
        stop_timeout_s: how long `stop` waits for a graceful exit before killing.
        labels: extra labels for what is started (also `OPENENV_LABELS`).
        name: a name for what is started (default: derived from the image or folder).
    """

    kind: ClassVar[str] = "provider"

    def __init__(
        self,
        *,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 5.0,
        labels: dict[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        if startup_timeout_s <= 0:
            raise ConfigurationError("startup_timeout_s must be > 0")
        if stop_timeout_s < 0:
            raise ConfigurationError("stop_timeout_s must be >= 0")
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.labels = dict(labels or {})
        self.name = name
        self.base_url: str | None = None
        self.base_urls: list[str] = []
        self.health_headers: dict[str, str] = {}
        self._launched = False
        self._stop_lock = threading.Lock()
        lifecycle.install_hooks()

    # -- what subclasses implement (blocking; run in a worker thread by the async API) -----------

    @abstractmethod
    def _launch(self) -> list[str]:
        """Start the server(s); returns their base URLs (before they are healthy)."""

    @abstractmethod
    def _terminate(self) -> None:
        """Stop and remove what `_launch` started; must tolerate it being gone already."""

    @abstractmethod
    def exit_reason(self) -> str | None:
        """None while the server runs; otherwise why it is gone (exit code, state)."""

    @abstractmethod
    def logs(self, tail: int = 200) -> str:
        """The server's last `tail` lines of output (empty when there are none)."""

    def describe(self) -> dict[str, Any]:
        """What was started, for records and `repr` (the id of the process, container...)."""
        return {"kind": self.kind, "name": self.name, "url": self.base_url}

    # -- the API -----------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server was started, not stopped, and has not exited."""
        return self._launched and self.exit_reason() is None

    def start(self) -> str:
        """Start the server and wait until it is healthy; returns its base URL.

        Raises:
            ProviderStartError: it did not become healthy (`.logs` has its last output); what
                was started has been stopped again.
            ProviderUnavailableError: the system behind the provider is missing.
        """
        return run_sync(self.astart())

    async def astart(self) -> str:
        """`start` for asyncio: the blocking parts run in a worker thread."""
        if self._launched and self.base_url is not None:
            return self.base_url
        self._launched = True
        lifecycle.register(self)
        try:
            urls = await in_thread(self._locked_launch)
            await self.wait_ready(urls)
        except ProviderStartError as exc:
            logs = await in_thread(self._safe_logs)
            await self.astop()
            tail = "\n".join(logs.splitlines()[-_LOG_LINES_IN_ERRORS:])
            message = f"{exc}\n--- last lines of its output ---\n{tail}" if tail.strip() else str(exc)
            raise ProviderStartError(message, logs=logs, url=exc.url) from None
        except BaseException:
            await asyncio.shield(self.astop())
            raise
        self.base_urls = urls
        self.base_url = urls[0]
        log.info("%s started: %s", self.kind, ", ".join(urls))
        return self.base_url

    async def wait_ready(self, urls: list[str] | None = None, timeout_s: float | None = None) -> None:
        """Wait until every URL answers `GET /health` with 200 (polling fast, then backing off).

        Raises:
            ProviderStartError: a server exited, reported itself unhealthy, or timed out.
        """
        targets = urls if urls is not None else self.base_urls
        limit = timeout_s if timeout_s is not None else self.startup_timeout_s

        async def _gone() -> str | None:
            return await in_thread(self.exit_reason)

        await asyncio.gather(
            *(wait_healthy(u, timeout_s=limit, exit_reason=_gone, headers=self.health_headers) for u in targets)
        )

    def _locked_launch(self) -> list[str]:
        # `stop` takes the same lock, so a stop that races a launch (a cancelled start, exit)
        # waits for the launch to finish and then removes what it made: nothing leaks.
        with self._stop_lock:
            if not self._launched:
                raise ProviderStartError(f"{self.kind} was stopped before it started")
            return self._launch()

    def stop(self) -> None:
        """Stop and remove the server; safe to call twice or after it died."""
        with self._stop_lock:
            if not self._launched:
                return
            self._launched = False
            try:
                self._terminate()
            finally:
                lifecycle.unregister(self)
                self.base_url = None
                self.base_urls = []

    async def astop(self) -> None:
        """`stop` for asyncio (the engine calls run in a worker thread)."""
        await in_thread(self.stop)

    def _safe_logs(self) -> str:
        try:
            return self.logs()
        except Exception as exc:  # the logs are a courtesy in an error message; say why they are missing
            return f"(logs unavailable: {exc})"

    # -- context managers --------------------------------------------------------------------------

    def __enter__(self) -> Provider:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Provider:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def __repr__(self) -> str:
        state = self.base_url or ("starting" if self._launched else "not started")
        return f"<{type(self).__name__} {self.name or ''} {state}>"
