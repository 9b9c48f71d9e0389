"""`LeaseBook`: the play sessions and model tries held right now, by every Hub process.

Each open session holds a lease row (which process, which visitor, until when). Taking one checks
the caps and inserts the row in one transaction that no other taker can interleave with (a
table lock on PostgreSQL, SQLite's single writer), so simultaneous starts on several processes
cannot pass the caps together. The holding process renews its leases (`renew`, from its
heartbeat); a process that dies stops renewing, and its leases stop counting once they expire.
"""

from __future__ import annotations

import os
import socket
import uuid

from sqlalchemy import text
from sqlalchemy.engine import Engine

from hub_service.quota._sql import Dialect

__all__ = ["CapReached", "LeaseBook"]

_FORGET_AFTER_S = 3600.0  # expired leases are deleted this long after they expired


class CapReached(Exception):
    """No lease: `which` cap is full ("total": all visitors together; "visitor": this visitor's)."""

    def __init__(self, which: str) -> None:
        super().__init__(which)
        self.which = which


class LeaseBook:
    """Leases of one holder (this process) in `play_leases`; every method is one short transaction.

    Args:
        engine: the Hub's database.
        lease_s: how long a lease counts without being renewed.
    """

    def __init__(self, engine: Engine, *, lease_s: float) -> None:
        self.lease_s = lease_s
        self.holder = f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._engine = engine.execution_options(openenv_write=True)  # SQLite: take the write lock at BEGIN
        self._sql = Dialect.of(engine)
        now = self._sql.now
        self._count = text(
            "SELECT count(*), coalesce(sum(CASE WHEN visitor = :visitor THEN 1 ELSE 0 END), 0) "
            f"FROM play_leases WHERE expires_at > {now}"
        )
        self._insert = text(
            "INSERT INTO play_leases (id, holder, visitor, kind, env_id, expires_at) "
            f"VALUES (:id, :holder, :visitor, :kind, :env_id, {now} + :lease_s)"
        )
        self._renew = text(f"UPDATE play_leases SET expires_at = {now} + :lease_s WHERE holder = :holder")
        self._forget = text(f"DELETE FROM play_leases WHERE expires_at < {now} - :forget_after_s")

    def take(self, visitor: str, kind: str, env_id: str, *, max_total: int, max_per_visitor: int) -> str:
        """A new lease for `visitor`'s session, when both caps leave room; returns its id.

        Raises:
            CapReached: a cap is full (`which` says which).
            sqlalchemy.exc.SQLAlchemyError: the database failed (the session is not started).
        """
        lease_id = uuid.uuid4().hex
        params = self._sql.params(
            id=lease_id,
            holder=self.holder,
            visitor=visitor[:128],
            kind=kind[:8],
            env_id=env_id[:255],
            lease_s=self.lease_s,
        )
        with self._engine.begin() as conn:
            if self._sql.postgres:
                # Takers queue here one at a time (renewals and releases wait only for this short transaction).
                conn.execute(text("LOCK TABLE play_leases IN SHARE ROW EXCLUSIVE MODE"))
            total, mine = conn.execute(self._count, params).one()
            if total >= max_total:
                raise CapReached("total")
            if mine >= max_per_visitor:
                raise CapReached("visitor")
            conn.execute(self._insert, params)
        return lease_id

    def release(self, lease_id: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(text("DELETE FROM play_leases WHERE id = :id"), {"id": lease_id})

    def renew(self) -> None:
        """Push on every lease of this holder by `lease_s`; forget leases long expired."""
        with self._engine.begin() as conn:
            conn.execute(self._renew, self._sql.params(holder=self.holder, lease_s=self.lease_s))
            conn.execute(self._forget, self._sql.params(forget_after_s=_FORGET_AFTER_S))

    def held(self) -> int:
        """Leases that count now, of every holder."""
        with self._engine.connect() as conn:
            return int(conn.execute(self._count, self._sql.params(visitor="")).one()[0])
