"""Env instances that play sessions run on: a live Space, or a server this service starts.

One instance per env revision, shared by every visitor playing it (each visitor still gets a
session of their own: one WebSocket, one env object). A started instance is stopped when its
last session ends and `linger_s` has passed with nobody coming back, and at shutdown; and when
the cap on instances is reached, the least recently used idle one is stopped for a new visitor
(an idle instance lingers only for whoever may come back, never to lock others out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hub_service.play.errors import AllInUse, PlayStartError

__all__ = ["Instance", "InstancePool", "Target"]

log = logging.getLogger("hub_service.play")


@dataclass(frozen=True)
class Target:
    """Where an env revision can be played: `url` when it already runs, else `make_provider()`."""

    key: str  # "owner/name@sha"
    how: str  # "space" | "docker" | "process"
    url: str | None = None
    make_provider: Callable[[], Any] | None = None
    # Called with the started provider before anyone plays it (the sandbox's runtime check); what it
    # raises stops the start, and its message (the host's trouble, never the env's) is the visitor's.
    check_started: Callable[[Any], None] | None = None
    # A Space that must be woken before it is played (play/waking.py): its stage then (SLEEPING, BUILDING...),
    # and what is played instead when it does not wake in time or answers 402 Payment Required.
    waking_from: str | None = None
    fallback: Target | None = None


@dataclass
class Instance:
    target: Target
    url: str | None = None
    provider: Any = None
    users: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    ready: asyncio.Future[str] | None = None

    @property
    def started_here(self) -> bool:
        return self.provider is not None


class InstancePool:
    """Starts, shares and stops env instances; all methods run on the service's event loop."""

    def __init__(self, *, max_instances: int, linger_s: float) -> None:
        self.max_instances = max_instances
        self.linger_s = linger_s
        self.instances: dict[str, Instance] = {}
        self._stopping: set[asyncio.Task[None]] = set()  # stops under way: a cancelled caller does not end them

    async def acquire(self, target: Target) -> Instance:
        """The running instance for `target` with one more user, started when needed.

        Raises:
            AllInUse: as many instances as allowed run already, each with a visitor on it.
            PlayStartError: the server did not start (the reason is in the message).
        """
        # Stopping takes awaits, in which others may take the freed place: so count again after each.
        while target.key not in self.instances and target.url is None and self._started() >= self.max_instances:
            idle = (i for i in self.instances.values() if i.target.make_provider is not None and i.users == 0)
            victim = min(idle, key=lambda i: i.idle_since, default=None)
            if victim is None:
                raise AllInUse(f"all {self.max_instances} environments this Hub runs for visitors are in use")
            log.info("reclaiming %s (idle, least recently used) for %s", victim.target.key, target.key)
            await self._stop(victim)
        inst = self.instances.get(target.key)
        if inst is None:
            inst = self.instances[target.key] = Instance(target=target, url=target.url)
            if target.url is None:
                inst.ready = asyncio.get_running_loop().create_task(self._start(inst))
        inst.users += 1
        try:
            if inst.ready is not None:
                await asyncio.shield(inst.ready)
        except BaseException:
            inst.users -= 1
            if self.instances.get(target.key) is inst and inst.ready is not None and inst.ready.done():
                self.instances.pop(target.key, None)
            raise
        return inst

    def _started(self) -> int:
        return sum(1 for i in self.instances.values() if i.target.make_provider is not None)

    async def _start(self, inst: Instance) -> str:
        from openenv.errors import OpenEnvError

        assert inst.target.make_provider is not None
        try:
            provider = inst.target.make_provider()
            inst.provider = provider
            log.info("starting %s for play (%s)", inst.target.key, inst.target.how)
            inst.url = await provider.astart()
        except OpenEnvError as exc:
            raise PlayStartError(f"{inst.target.key} did not start: {_first_line(exc)}") from exc
        if inst.target.check_started is not None:
            try:
                await asyncio.to_thread(inst.target.check_started, provider)
            except Exception as exc:
                log.warning("stopped %s before play: %s", inst.target.key, exc)
                with contextlib.suppress(Exception):
                    await provider.astop()
                raise PlayStartError(
                    f"this Hub cannot play {inst.target.key} right now: its sandbox could not be verified "
                    "(the Hub's set-up, not the env's; its operator is told)"
                ) from exc
        return inst.url

    async def release(self, inst: Instance) -> None:
        """One user fewer; stops the instance now when nobody uses it and there is no linger."""
        inst.users = max(0, inst.users - 1)
        if inst.users == 0:
            inst.idle_since = time.monotonic()
            if self.linger_s <= 0:
                await self._stop(inst)

    async def reap(self, now: float | None = None) -> int:
        """Stop instances nobody has used for `linger_s`; returns how many were stopped."""
        now = time.monotonic() if now is None else now
        idle = [i for i in self.instances.values() if i.users == 0 and now - i.idle_since >= self.linger_s]
        for inst in idle:
            await self._stop(inst)
        return len(idle)

    async def _stop(self, inst: Instance) -> None:
        if self.instances.get(inst.target.key) is inst:
            del self.instances[inst.target.key]
        if inst.ready is not None and not inst.ready.done():
            inst.ready.cancel()
            with contextlib.suppress(BaseException):
                await inst.ready
        if inst.provider is not None:
            log.info("stopping %s (no visitor plays it)", inst.target.key)
            # A task of its own: the reaper being cancelled at shutdown must not leave the server half-stopped.
            stop = asyncio.get_running_loop().create_task(inst.provider.astop())
            self._stopping.add(stop)
            stop.add_done_callback(self._stopping.discard)
            try:
                await asyncio.shield(stop)
            except asyncio.CancelledError:
                raise
            except Exception:  # stopping must go on for the others; the provider's own gc backs it up
                log.exception("stopping %s failed", inst.target.key)

    async def aclose(self) -> None:
        for inst in list(self.instances.values()):
            await self._stop(inst)
        if self._stopping:  # stops a cancelled reaper began: they finish before shutdown does
            await asyncio.gather(*self._stopping, return_exceptions=True)

    def running(self) -> list[dict[str, Any]]:
        return [
            {"env": i.target.key, "how": i.target.how, "users": i.users, "started_here": i.started_here}
            for i in self.instances.values()
        ]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
