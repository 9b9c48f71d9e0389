"""The "fork" extension's requests: snapshot, restore, release, and fork into new sessions.

Transport-free like the runtime (which holds one `Forks` when its env can be snapshotted). Every
refusal is a `RequestError` with its own code and leaves the session as it was: a restore either
puts the whole state back or (the env raised) reports EXECUTION_ERROR; a fork either makes all
its children or none, and releases the slots it held.

Children are sessions of their own, counted against capacity, that a WebSocket claims with
`/ws?session_id=<id>` (as for HTTP-made sessions); a claimed child closes with its socket, an
unclaimed one with its parent or when idle past the session timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from openenv.env import AnyEnvironment
from openenv.errors import SnapshotUnsupportedError
from openenv.protocol import ErrorCode, dumps
from openenv.server._errors import RequestError
from openenv.server._runtime_view import RuntimeView
from openenv.server.mcp import McpService
from openenv.server.sessions import CapacityError, FactoryError, Session
from openenv.server.snapshots import SnapshotRecord, SnapshotStore

__all__ = ["Forks"]


class _ForkRuntime(RuntimeView, Protocol):
    """What `Forks` uses of its `EnvRuntime`: a `RuntimeView` and its `McpService` (which adopts children)."""

    @property
    def mcp(self) -> McpService: ...


class Forks:
    """Snapshots and forks of one server's sessions."""

    def __init__(self, runtime: _ForkRuntime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.store = SnapshotStore(runtime.settings)
        runtime.sessions.snapshots = self.store

    def limits(self) -> dict[str, Any]:
        """The bounds a client may plan with (shown in /metadata's `protocol.fork`)."""
        s = self.settings
        return {
            "snapshots_per_session": s.snapshots_per_session,
            "snapshot_bytes_per_session": s.snapshot_bytes_per_session,
            "snapshot_ttl_s": s.snapshot_ttl_s,
            "max_children": s.fork_max_children,
        }

    # -- requests -------------------------------------------------------------------------------

    async def snapshot(self, session: Session) -> bytes:
        """Keep the session's state; the reply's `data` names it by id."""
        state = await self._take(session)
        record = self.store.add(session.id, state, session.last_observation, _step_count(session.env))
        return dumps(self._describe(record))

    async def restore(self, session: Session, data: Any) -> bytes:
        """Put a snapshot of this session back; the reply is the observation sent at that state."""
        record = self.store.get(session.id, _snapshot_id(data))
        self._not_busy(session)
        await self._put(session.env, record.state)
        session.last_observation = record.observation
        return record.observation or b"null"

    async def release(self, session: Session, data: Any) -> bytes:
        snapshot_id = _snapshot_id(data)
        self.store.release(session.id, snapshot_id)
        return dumps({"snapshot_id": snapshot_id, "released": True})

    async def fork(self, session: Session, data: Any) -> bytes:
        """Make `n` new sessions in this one's state (or a snapshot's, with `snapshot_id`)."""
        if data is None:
            data = {}
        if type(data) is not dict:
            raise RequestError(ErrorCode.VALIDATION_ERROR, 'fork data must be an object: {"n": 8}')
        n = data.get("n", 1)
        limit = self.settings.fork_max_children
        if type(n) is not int or not 1 <= n <= limit:
            raise RequestError(
                ErrorCode.VALIDATION_ERROR,
                f"n must be an integer from 1 to {limit} (the server's fork_max_children), got {n!r}",
                max_children=limit,
            )
        if data.get("snapshot_id") is not None:
            record = self.store.get(session.id, data["snapshot_id"])
            state, observation = record.state, record.observation
        else:
            state, observation = await self._take(session), session.last_observation
        sessions = self.runtime.sessions
        try:
            sessions.reserve(n)
        except CapacityError as exc:
            raise RequestError(
                ErrorCode.CAPACITY_REACHED,
                str(exc),
                active_sessions=exc.active,
                max_sessions=exc.maximum,
                requested=n,
            ) from None
        envs: list[AnyEnvironment] = []
        try:
            for _ in range(n):
                env = await sessions.build_env()
                envs.append(env)
                await self._put(env, state)
        except FactoryError as exc:
            await _close_all(sessions, envs)
            raise RequestError(ErrorCode.FACTORY_ERROR, str(exc), factory_name=exc.factory_name) from None
        except BaseException:
            await _close_all(sessions, envs)
            raise
        finally:
            sessions.release(n)
        children = await sessions.open_many(envs)
        mcp = self.runtime.mcp
        for child in children:
            child.last_observation = observation
            child.steps = session.steps
            mcp.adopt(child)
        session.children = [c for c in session.children if not c.closed] + children
        return b'{"session_ids":%b,"observation":%b}' % (dumps([c.id for c in children]), observation or b"null")

    # -- the env's side -------------------------------------------------------------------------

    async def _take(self, session: Session) -> Any:
        self._not_busy(session)
        env = session.env
        try:
            return await self.runtime.executor.run(type(env), "snapshot", env.snapshot)
        except SnapshotUnsupportedError as exc:
            raise RequestError(ErrorCode.FORK_UNSUPPORTED, str(exc)) from None
        except Exception as exc:
            raise RequestError(ErrorCode.EXECUTION_ERROR, f"snapshot() raised {type(exc).__name__}: {exc}") from exc

    async def _put(self, env: AnyEnvironment, state: Any) -> None:
        try:
            await self.runtime.executor.run(type(env), "restore", env.restore, state)
        except SnapshotUnsupportedError as exc:
            raise RequestError(ErrorCode.FORK_UNSUPPORTED, str(exc)) from None
        except Exception as exc:
            raise RequestError(ErrorCode.EXECUTION_ERROR, f"restore() raised {type(exc).__name__}: {exc}") from exc

    def _not_busy(self, session: Session) -> None:
        if self.runtime.executor.running_late(session.env):
            raise RequestError(
                ErrorCode.SESSION_BUSY,
                "a call that timed out still runs in this session's environment; "
                "snapshot, restore and fork wait for it to end: retry shortly",
            )

    def _describe(self, record: SnapshotRecord) -> dict[str, Any]:
        return {
            "snapshot_id": record.id,
            "step_count": record.step_count,
            "bytes": record.nbytes,
            "expires_in_s": self.store.ttl_s,
        }


def _snapshot_id(data: Any) -> Any:
    if type(data) is not dict:
        raise RequestError(ErrorCode.VALIDATION_ERROR, 'name the snapshot: {"snapshot_id": "..."}')
    return data.get("snapshot_id")


def _step_count(env: AnyEnvironment) -> int | None:
    try:
        count = env.state.step_count
    except Exception:  # a state that cannot be read says nothing about the snapshot
        return None
    return count if type(count) is int else None


async def _close_all(sessions: Any, envs: list[AnyEnvironment]) -> None:
    await asyncio.gather(*(sessions.close_env(env) for env in envs))
