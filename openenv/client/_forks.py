"""The client's side of the "fork" extension: snapshot, restore, release, and fork into sessions.

The server keeps every state; the client holds `Snapshot` handles (ids). `fork(n)` asks for n new
sessions in this one's state in one round trip, then attaches a client to each (`/ws?session_id=`),
all at once. Servers that do not announce "fork" (upstream's, or an env that cannot be snapshotted)
are never sent these frames: the call raises `SnapshotError` (FORK_UNSUPPORTED) at once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

from openenv.errors import SnapshotError
from openenv.protocol import FORK_EXTENSION, dumps
from openenv.types import Snapshot, StepResult

if TYPE_CHECKING:
    from openenv.client._transport import Connection

__all__ = ["ForksMixin"]

SelfT = TypeVar("SelfT", bound="ForksMixin")

_SNAPSHOT_REQUEST = b'{"type":"snapshot"}'


class ForksMixin:
    """`snapshot`, `restore`, `release`, `fork` (and upstream's names `get_state` / `set_state`)."""

    base_url: str
    ws_url: str
    message_timeout_s: float | None
    _children: list[Any]

    if TYPE_CHECKING:

        async def _live(self, reconnect: bool) -> Connection: ...
        def _reply(self, raw: bytes, expected: str) -> dict[str, Any]: ...
        def _parse_result(self, payload: dict[str, Any]) -> StepResult[Any]: ...
        def _spawn(self: SelfT, ws_url: str) -> SelfT: ...
        async def connect(self: SelfT) -> SelfT: ...
        async def close(self) -> None: ...

    async def snapshot(self) -> Snapshot:
        """Have the server keep the environment's state now; returns its handle.

        Raises:
            SnapshotError: FORK_UNSUPPORTED (the server or env cannot), SNAPSHOT_LIMIT (this
                session or the server holds too many: `release` some), SESSION_BUSY.
        """
        conn = await self._forkable()
        data = self._reply(await conn.call(_SNAPSHOT_REQUEST, self.message_timeout_s), "snapshot")
        return Snapshot(
            id=str(data.get("snapshot_id")),
            step_count=data.get("step_count"),
            nbytes=int(data.get("bytes") or 0),
            expires_in_s=data.get("expires_in_s"),
        )

    async def restore(self, snapshot: Snapshot | str) -> StepResult[Any] | None:
        """Put the environment back in the state of `snapshot` (one of this session's).

        Returns:
            The observation the server sent at that state (None if it had sent none yet).

        Raises:
            SnapshotError: SNAPSHOT_NOT_FOUND (unknown, released, or another session's),
                SNAPSHOT_EXPIRED, FORK_UNSUPPORTED, SESSION_BUSY. The session is unchanged.
        """
        conn = await self._forkable()
        frame = dumps({"type": "restore", "data": {"snapshot_id": _id_of(snapshot)}})
        raw = await conn.call(frame, self.message_timeout_s)
        payload = self._reply(raw, "observation")
        return self._parse_result(payload) if payload else None

    async def release(self, snapshot: Snapshot | str) -> None:
        """Let the server drop `snapshot` (its memory counts against this session's limits)."""
        conn = await self._forkable()
        frame = dumps({"type": "release", "data": {"snapshot_id": _id_of(snapshot)}})
        self._reply(await conn.call(frame, self.message_timeout_s), "release")

    async def fork(self: SelfT, n: int = 1, *, snapshot: Snapshot | str | None = None) -> list[SelfT]:
        """`n` new sessions in this one's state now (or in `snapshot`'s), each with a client of
        its own, connected; they close with this client (or on their own `close()`).

        Raises:
            CapacityReachedError: the server has fewer than `n` free sessions (none was made).
            SnapshotError: as for `snapshot` / `restore`.
        """
        conn = await self._forkable()
        body: dict[str, Any] = {"n": n}
        if snapshot is not None:
            body["snapshot_id"] = _id_of(snapshot)
        data = self._reply(await conn.call(dumps({"type": "fork", "data": body}), self.message_timeout_s), "fork")
        ids = [str(i) for i in data.get("session_ids") or ()]
        sep = "&" if "?" in self.ws_url else "?"
        children = [self._spawn(f"{self.ws_url}{sep}session_id={sid}") for sid in ids]
        results = await asyncio.gather(*(child.connect() for child in children), return_exceptions=True)
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            await asyncio.gather(*(child.close() for child in children), return_exceptions=True)
            raise failed
        self._children.extend(children)
        return children

    async def get_state(self) -> Snapshot:
        """Upstream's name for `snapshot()`."""
        return await self.snapshot()

    async def set_state(self, snapshot: Snapshot | str) -> StepResult[Any] | None:
        """Upstream's name for `restore()`."""
        return await self.restore(snapshot)

    async def _forkable(self) -> Connection:
        conn = await self._live(reconnect=False)
        if FORK_EXTENSION not in conn.extensions:
            raise SnapshotError(
                f"FORK_UNSUPPORTED: the server does not announce the fork extension (an upstream server, or an "
                f"env that cannot be snapshotted: see its /metadata) [{self.base_url}]",
                code="FORK_UNSUPPORTED",
                url=self.base_url,
            )
        return conn


def _id_of(snapshot: Snapshot | str) -> str:
    if isinstance(snapshot, Snapshot):
        return snapshot.id
    if isinstance(snapshot, str):
        return snapshot
    raise TypeError(f"expected a Snapshot (from snapshot()) or its id, not {type(snapshot).__name__}")
