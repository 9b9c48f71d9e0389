"""Sessions: one environment instance per WebSocket connection, bounded and reaped.

A session is a few slots of bookkeeping beside its environment; there is no thread or task per
session beyond the connection's own handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from openenv.env import AnyEnvironment, Environment
from openenv.server.execution import Executor

if TYPE_CHECKING:
    from openenv.server.snapshots import SnapshotStore

__all__ = ["CapacityError", "FactoryError", "Session", "SessionManager"]

log = logging.getLogger("openenv.server")


class CapacityError(Exception):
    def __init__(self, active: int, maximum: int, requested: int = 1) -> None:
        wanted = "" if requested == 1 else f"; a fork asked for {requested} more"
        super().__init__(
            f"Server at capacity: {active} of {maximum} sessions in use{wanted}; "
            "close a session, retry later, or raise OPENENV_MAX_SESSIONS"
        )
        self.active = active
        self.maximum = maximum
        self.requested = requested


class FactoryError(Exception):
    def __init__(self, factory_name: str, cause: BaseException) -> None:
        super().__init__(f"Could not build the environment with {factory_name}: {type(cause).__name__}: {cause}")
        self.factory_name = factory_name


class Session:
    """One client's environment and its activity clock."""

    __slots__ = (
        "attached",
        "busy",
        "children",
        "closed",
        "created_at",
        "env",
        "id",
        "last_active",
        "last_observation",
        "on_expire",
        "steps",
    )

    def __init__(self, env: AnyEnvironment, on_expire: Callable[[str], Awaitable[None]] | None) -> None:
        self.id = uuid.uuid4().hex
        self.env = env
        self.created_at = self.last_active = time.monotonic()
        self.steps = 0
        self.busy = False
        self.closed = False
        self.attached = False  # an HTTP-made session that a WebSocket drives now: never reaped meanwhile
        self.on_expire = on_expire
        self.last_observation: bytes | None = None  # the payload last sent: kept with snapshots
        self.children: list[Session] = []  # sessions forked from this one, until a socket claims them


class SessionManager:
    """Creates environments within a capacity, closes them, and reaps idle sessions."""

    def __init__(
        self,
        factory: Callable[[], AnyEnvironment],
        *,
        max_sessions: int,
        idle_timeout_s: float,
        executor: Executor,
    ) -> None:
        self._factory = factory
        self._factory_name = getattr(factory, "__qualname__", None) or repr(factory)
        self._factory_owner: type = factory if isinstance(factory, type) else type(factory)
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.executor = executor
        self.sessions: dict[str, Session] = {}
        self.snapshots: SnapshotStore | None = None  # set by the runtime when the env can be snapshotted
        self._reserved = 0
        self._spare: AnyEnvironment | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.factory_error: str | None = None
        self.factory_checked = asyncio.Event()

    @property
    def active(self) -> int:
        return len(self.sessions) + self._reserved

    async def build_env(self) -> AnyEnvironment:
        """Build one environment with the factory (a spare built at start-up is used first)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            return spare
        try:
            env = await self.executor.run(self._factory_owner, "__factory__", self._factory)
            if inspect.isawaitable(env):
                env = await env
        except Exception as exc:
            self.factory_error = f"{type(exc).__name__}: {exc}"
            raise FactoryError(self._factory_name, exc) from exc
        if not isinstance(env, Environment):
            self.factory_error = f"the factory returned {type(env).__name__}, not an Environment"
            raise FactoryError(self._factory_name, TypeError(self.factory_error))
        self.factory_error = None
        return env

    async def warm_up(self) -> None:
        """Build a spare environment at start-up: proves the factory works, speeds the first session."""
        try:
            self._spare = await self.build_env()
        except FactoryError as exc:
            log.error("environment factory failed at start-up: %s", exc)
        finally:
            self.factory_checked.set()

    async def open(self, on_expire: Callable[[str], Awaitable[None]] | None = None) -> Session:
        """Reserve a slot and build the session's environment.

        Raises:
            CapacityError: all slots are taken.
            FactoryError: the environment could not be built (the slot is released).
        """
        if self.active >= self.max_sessions:
            raise CapacityError(self.active, self.max_sessions)
        self._reserved += 1
        try:
            env = await self.build_env()
        finally:
            self._reserved -= 1
        session = Session(env, on_expire)
        self.sessions[session.id] = session
        return session

    async def open_many(self, envs: list[AnyEnvironment]) -> list[Session]:
        """Sessions for environments built already (forks); the caller checked the capacity."""
        made = [Session(env, None) for env in envs]
        for session in made:
            self.sessions[session.id] = session
        return made

    def reserve(self, n: int) -> None:
        """Hold `n` slots while their environments are built (`release` them after).

        Raises:
            CapacityError: fewer than `n` slots are free.
        """
        if self.active + n > self.max_sessions:
            raise CapacityError(self.active, self.max_sessions, requested=n)
        self._reserved += n

    def release(self, n: int) -> None:
        self._reserved -= n

    async def close(self, session: Session) -> None:
        """Free the session's slot at once and close its environment (idempotent), with its
        snapshots and the forks of it that no socket has claimed."""
        if session.closed:
            return
        session.closed = True
        self.sessions.pop(session.id, None)
        if self.snapshots is not None:
            self.snapshots.drop_session(session.id)
        children, session.children = session.children, []
        for child in children:
            if not child.attached:
                await self.close(child)
        await self.close_env(session.env)

    async def close_env(self, env: AnyEnvironment) -> None:
        try:
            if type(env).close is not Environment.close:
                await self.executor.run(type(env), "close", env.close)
        except Exception:
            log.exception("closing %s raised", type(env).__name__)

    def start_reaper(self) -> None:
        if self.idle_timeout_s > 0 and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever(), name="openenv-reaper")

    async def _reap_forever(self) -> None:
        interval = max(0.05, min(30.0, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close every session idle longer than the timeout; returns how many were closed."""
        deadline = time.monotonic() - self.idle_timeout_s
        idle = [s for s in self.sessions.values() if not s.busy and not s.attached and s.last_active < deadline]
        for session in idle:
            reason = f"session idle for over {self.idle_timeout_s:g}s; reconnect to start a new one"
            await self.close(session)
            if session.on_expire is not None:
                try:
                    await session.on_expire(reason)
                except Exception:  # the peer may already be gone; the session is freed either way
                    log.debug("could not notify expired session %s", session.id, exc_info=True)
        return len(idle)

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for session in list(self.sessions.values()):
            await self.close(session)
        if self._spare is not None:
            spare, self._spare = self._spare, None
            await self.close_env(spare)
        self.executor.shutdown()
