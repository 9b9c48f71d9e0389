"""Fencing the periodic duties: a duty runs under the lease's term it started with, and what it
writes commits only while the lease still has that term and holder, so a leader that lost the lease
in the middle of a duty (a stall, a partition, a clock that jumped) changes nothing after that.

The check is the database's, in the transaction it guards: on PostgreSQL the lease row is read
`FOR SHARE`, which waits for a takeover in flight and then holds the row until the transaction ends
(a takeover's UPDATE waits for it in turn); on SQLite a transaction that writes holds the database's
one write lock, so no takeover can commit between the check and the commit. Writes outside the
database (deleting an image from the registry) call `check` first, inside a transaction that writes.
"""

from __future__ import annotations

import logging

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine

from hub_service.errors import HubError

__all__ = ["Deposed", "Fence"]

log = logging.getLogger("hub_service.leadership")


class Deposed(HubError):
    """Another process took the lease over while this one's duty ran: the duty stops, and the
    transaction that found out is rolled back."""

    status, code = 503, "deposed"


class Fence:
    """The lease `group` as duty `duty` found it when it started: held by `holder` in `term`.

    Once it finds the lease taken over it stays deposed (a term never comes back), so the rest of
    the duty fails at its first write without asking the database again.
    """

    def __init__(self, group: str, holder: str, term: int, duty: str = "duty") -> None:
        self.group, self.holder, self.term, self.duty = group, holder, term, duty
        self.deposed = False

    def check(self, conn: Connection) -> None:
        """Raise `Deposed` unless the lease still has this term and holder; until `conn`'s
        transaction ends no one can take it over (on SQLite, call it in a transaction that writes).

        Raises:
            Deposed: the lease has another holder or term (the warning says whose).
        """
        if self.deposed:
            raise self._error()
        lock = " FOR SHARE" if conn.dialect.name == "postgresql" else ""
        row = conn.execute(
            text(f"SELECT holder, term FROM service_leases WHERE name = :name{lock}"), {"name": self.group}
        ).first()
        if row is None or row.holder != self.holder or int(row.term) != self.term:
            self.deposed = True
            log.warning(
                "the %s duty stops: this process (%s) lost the lease on the periodic duties it held in term %s "
                "(the lease is now %s); nothing more of this run is written",
                self.duty,
                self.holder,
                self.term,
                f"{row.holder}'s, term {row.term}" if row is not None else "nobody's",
            )
            raise self._error()

    def guard(self, engine: Engine) -> Engine:
        """`engine`, each of whose transactions checks the fence as it commits: a deposed duty's
        transaction is rolled back and its commit raises `Deposed`. Give each duty its own engine."""
        event.listen(engine, "commit", self._on_commit)
        return engine

    def _on_commit(self, conn: Connection) -> None:
        try:
            self.check(conn)
        except BaseException:
            # The commit stops here, before the driver's: end the transaction ourselves, or the
            # connection would go back to the pool still inside it.
            dbapi = conn.connection.dbapi_connection
            if dbapi is not None:
                dbapi.rollback()
            raise

    def _error(self) -> Deposed:
        return Deposed(
            f"the {self.duty} duty of term {self.term} was deposed: another process runs the periodic duties now"
        )
