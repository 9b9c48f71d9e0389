"""Replacing an `EnvPool`'s dead servers, for providers that can (`RayProvider`, made by `EnvPool.ray`).

Every `health_interval_s` the watch asks each such provider which of its servers died. A dead one
leaves the pool's rotation at once, the sessions on it are closed (their next or pending call
raises `EnvDisconnectedError`), and the provider starts a replacement, which joins the pool's
`urls` (what a `RolloutEngine` given the pool draws its servers from) once healthy.

The pool is passed in, never imported (`WatchedPool` names what the watch uses of it): the pool
holds a watch, the watch drives the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from openenv.client.providers.base import Provider, in_thread
from openenv.errors import ConfigurationError

__all__ = ["ReplacingProvider", "ReplicaWatch", "WatchedPool"]

log = logging.getLogger("openenv.providers")


@runtime_checkable
class ReplacingProvider(Protocol):
    """A provider that health-checks its servers one by one and replaces a dead one.

    A replica has `url`, `node` (where it runs) and `dead` (why it died, or None).
    """

    replicas: list[Any]

    def check(self) -> list[Any]:
        """The replicas found dead now (each marked with why)."""
        ...

    def replace(self, replica: Any) -> Any:
        """Remove a dead replica and start another; returns the new one."""
        ...

    async def wait_ready(self, urls: list[str] | None = None, timeout_s: float | None = None) -> None:
        """Wait until the servers at `urls` are healthy."""
        ...


class WatchedPool(Protocol):
    """The parts of an `EnvPool` its watch drives (the pool passes itself)."""

    @property
    def providers(self) -> Sequence[Provider]: ...

    @property
    def _closed(self) -> bool: ...

    async def _retire(self, url: str) -> None:
        """Take `url` out of the rotation and close the sessions on it."""
        ...

    async def _admit(self, url: str, provider: Provider) -> None:
        """Put a healthy replacement at `url` into the rotation."""
        ...


class ReplicaWatch:
    """Health-checks a pool's replacing providers and replaces the servers that died."""

    def __init__(self, pool: WatchedPool, health_interval_s: float = 0.5) -> None:
        if health_interval_s <= 0:
            raise ConfigurationError("health_interval_s must be > 0")
        self.pool = pool
        self.health_interval_s = health_interval_s
        self.replacements = 0
        self._nodes: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="openenv-pool-health")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def node_of(self, url: str) -> str | None:
        """The node serving `url` (also for servers already replaced)."""
        self._remember_nodes()
        return self._nodes.get(url)

    def _remember_nodes(self) -> None:
        # Records made after a server is gone still name the node it ran on.
        for provider in self.pool.providers:
            for replica in getattr(provider, "replicas", []):
                self._nodes[replica.url] = replica.node

    async def check_now(self) -> int:
        """Run one health check now; returns how many servers were found dead (and replaced)."""
        found = 0
        for provider in self.pool.providers:
            if not isinstance(provider, ReplacingProvider):
                continue
            dead = await in_thread(provider.check)
            found += len(dead)
            for replica in dead:
                log.warning("env server %s is gone (%s); replacing it", replica.url, replica.dead or "died")
                self._remember_nodes()
                await self.pool._retire(replica.url)
            await asyncio.gather(*(self._replace(provider, replica) for replica in dead))
        return found

    async def _watch(self) -> None:
        while not self.pool._closed:
            await asyncio.sleep(self.health_interval_s)
            try:
                await self.check_now()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep watching; the next round tries again
                log.exception("pool health check failed")

    async def _replace(self, provider: Provider, replica: Any) -> None:
        assert isinstance(provider, ReplacingProvider)
        try:
            new = await in_thread(provider.replace, replica)
            await provider.wait_ready([new.url])
        except Exception as exc:
            log.error("could not replace %s: %s", replica.url, exc)
            return
        self._remember_nodes()
        await self.pool._admit(new.url, provider)
        self.replacements += 1
