"""The server's snapshots (the "fork" extension): env states kept here, clients hold only ids.

An env's `snapshot()` returns an object that never leaves this process, so nothing a client sends
is ever deserialised: a restore names an id, and the id is only a key into this store. The store
is bounded per session and per server, by count and by size, and an unused snapshot expires after
`snapshot_ttl_s`; a session's snapshots go when it closes. A snapshot that would pass a bound is
refused (SNAPSHOT_LIMIT) rather than silently evicting another the client may still mean to use.
"""

from __future__ import annotations

import pickle
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from openenv.protocol import ErrorCode
from openenv.server._errors import RequestError
from openenv.server.settings import ServerSettings

__all__ = ["SnapshotRecord", "SnapshotStore", "estimate_bytes"]

_TOMBSTONES = 4096  # ids recently expired, remembered so a late restore hears "expired", not "unknown"
_WALK_LIMIT = 100_000  # objects an unpicklable state's size walk visits at most


class SnapshotRecord:
    """One kept state: whose it is, the env's object, and the observation sent with that state."""

    __slots__ = ("id", "last_used", "nbytes", "observation", "owner", "state", "step_count")

    def __init__(
        self, owner: str, state: Any, observation: bytes | None, step_count: int | None, nbytes: int, now: float
    ) -> None:
        self.id = secrets.token_urlsafe(18)
        self.owner = owner
        self.state = state
        self.observation = observation
        self.step_count = step_count
        self.nbytes = nbytes
        self.last_used = now


class SnapshotStore:
    """Every snapshot of one server, bounded as its settings say."""

    def __init__(self, settings: ServerSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_session = settings.snapshots_per_session
        self.bytes_per_session = settings.snapshot_bytes_per_session
        self.total = settings.snapshots_total
        self.bytes_total = settings.snapshot_bytes_total
        self.ttl_s = settings.snapshot_ttl_s
        self.clock = clock
        self._records: OrderedDict[str, SnapshotRecord] = OrderedDict()  # least recently used first
        self._by_session: dict[str, dict[str, SnapshotRecord]] = {}
        self._session_bytes: dict[str, int] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._records)

    def count_of(self, session_id: str) -> int:
        return len(self._by_session.get(session_id, ()))

    def bytes_of(self, session_id: str) -> int:
        return self._session_bytes.get(session_id, 0)

    def add(self, session_id: str, state: Any, observation: bytes | None, step_count: int | None) -> SnapshotRecord:
        """Keep `state` for `session_id`.

        Raises:
            RequestError: SNAPSHOT_LIMIT, when it would pass a bound of the session or the server.
        """
        now = self.clock()
        self._expire(now)
        nbytes = estimate_bytes(state) + (len(observation) if observation else 0)
        mine = self._by_session.get(session_id, {})
        mine_bytes = self._session_bytes.get(session_id, 0)
        limits = {
            "snapshots": len(mine),
            "snapshot_bytes": mine_bytes,
            "max_snapshots": self.per_session,
            "max_snapshot_bytes": self.bytes_per_session,
        }
        if len(mine) >= self.per_session:
            raise RequestError(
                ErrorCode.SNAPSHOT_LIMIT,
                f"this session holds {len(mine)} snapshots, its limit; release some (release(snapshot)) first",
                **limits,
            )
        if mine_bytes + nbytes > self.bytes_per_session:
            raise RequestError(
                ErrorCode.SNAPSHOT_LIMIT,
                f"a snapshot of {nbytes} bytes would take this session's snapshots past "
                f"{self.bytes_per_session} bytes; release some first",
                **limits,
            )
        if len(self._records) >= self.total or self.nbytes + nbytes > self.bytes_total:
            raise RequestError(
                ErrorCode.SNAPSHOT_LIMIT,
                f"the server holds {len(self._records)} snapshots ({self.nbytes} bytes), its limit; "
                "release some, or retry once others expire",
                **limits,
            )
        record = SnapshotRecord(session_id, state, observation, step_count, nbytes, now)
        self._records[record.id] = record
        self._by_session.setdefault(session_id, {})[record.id] = record
        self._session_bytes[session_id] = mine_bytes + nbytes
        self.nbytes += nbytes
        return record

    def get(self, session_id: str, snapshot_id: Any) -> SnapshotRecord:
        """The snapshot `snapshot_id` of `session_id` (its clock starts again).

        Raises:
            RequestError: SNAPSHOT_NOT_FOUND (not an id, unknown, released, another session's)
                or SNAPSHOT_EXPIRED.
        """
        if not isinstance(snapshot_id, str) or not snapshot_id or len(snapshot_id) > 64:
            raise RequestError(
                ErrorCode.SNAPSHOT_NOT_FOUND,
                'name the snapshot by the id snapshot() returned: {"snapshot_id": "..."}',
            )
        now = self.clock()
        self._expire(now)
        record = self._records.get(snapshot_id)
        if record is None:
            if snapshot_id in self._gone:
                raise RequestError(
                    ErrorCode.SNAPSHOT_EXPIRED,
                    f"snapshot {snapshot_id} expired after {self.ttl_s:g}s unused; take a new one",
                    ttl_s=self.ttl_s,
                )
            raise RequestError(
                ErrorCode.SNAPSHOT_NOT_FOUND,
                f"no snapshot {snapshot_id} on this server: it was never taken, was released, or its session closed",
            )
        if record.owner != session_id:
            raise RequestError(
                ErrorCode.SNAPSHOT_NOT_FOUND,
                f"snapshot {snapshot_id} is not this session's; a session restores only its own snapshots",
            )
        record.last_used = now
        self._records.move_to_end(snapshot_id)
        return record

    def release(self, session_id: str, snapshot_id: Any) -> None:
        """Drop a snapshot of `session_id` (same errors as `get`)."""
        self._drop(self.get(session_id, snapshot_id))

    def drop_session(self, session_id: str) -> None:
        """Drop every snapshot of a session (it closed)."""
        for record in list(self._by_session.get(session_id, {}).values()):
            self._drop(record)

    def expire(self) -> int:
        """Drop the snapshots unused for `ttl_s`; returns how many went."""
        return self._expire(self.clock())

    def _expire(self, now: float) -> int:
        deadline = now - self.ttl_s
        gone = 0
        records = self._records
        while records:
            record = next(iter(records.values()))
            if record.last_used > deadline:
                break
            self._drop(record)
            self._gone[record.id] = None
            if len(self._gone) > _TOMBSTONES:
                self._gone.popitem(last=False)
            gone += 1
        return gone

    def _drop(self, record: SnapshotRecord) -> None:
        if self._records.pop(record.id, None) is None:
            return
        mine = self._by_session.get(record.owner)
        if mine is not None:
            mine.pop(record.id, None)
            if not mine:
                del self._by_session[record.owner]
        left = self._session_bytes.get(record.owner, 0) - record.nbytes
        if left > 0 and record.owner in self._by_session:
            self._session_bytes[record.owner] = left
        else:
            self._session_bytes.pop(record.owner, None)
        self.nbytes -= record.nbytes


def estimate_bytes(state: Any) -> int:
    """About how much memory `state` holds: its pickled size (the server pickles its own object
    only to measure it, and never unpickles anything), else a walk of its containers."""
    try:
        return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # an unpicklable object (a handle, a lock): count what can be reached
        return _walk_size(state)


def _walk_size(root: Any) -> int:
    seen: set[int] = set()
    todo = [root]
    total = 0
    while todo and len(seen) < _WALK_LIMIT:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 64)
        if isinstance(obj, dict):
            todo.extend(obj.keys())
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif hasattr(obj, "__dict__"):
            todo.append(vars(obj))
    return total
