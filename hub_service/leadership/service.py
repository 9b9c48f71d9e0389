"""The lease on the periodic duties: exactly one Hub process (of any number, on any hosts, sharing
one database) runs the crawl, the health poll and image collection at a time.

The lease is a row in `service_leases`. Its holder renews it every third of `lease_s`; any process
may take it once it has run out (a holder killed outright stops renewing, so another takes over
within one lease). Times come from the database's clock on PostgreSQL, so hosts whose clocks differ
still agree. A holder counts itself the leader only until `lease_s` after it *sent* its last
successful renewal (the database's expiry is never earlier), so a holder cut off from the database
stops starting duties before anyone else may start them. A duty that is still running when another
process takes over is fenced (hub_service/leadership/fence.py): it gets the term it started in, and
none of its writes commits once the lease has another term.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from hub_service.leadership.fence import Deposed, Fence
from hub_service.quota._sql import Dialect

__all__ = ["DUTY_GROUP", "Leadership", "run_duty"]

log = logging.getLogger("hub_service.leadership")
DUTY_GROUP = "duties"
_KEEP_RUNS_S = 7 * 86400.0  # the record of duty runs is for operators' questions of the last days


class Leadership:
    """This process's claim on the lease `group`; every method is one short transaction.

    Args:
        engine: the Hub's database.
        lease_s: how long a lease lasts without renewal (the longest a takeover waits).
    """

    def __init__(self, engine: Engine, *, lease_s: float, group: str = DUTY_GROUP) -> None:
        self.lease_s = lease_s
        self.group = group
        self.holder = f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.term = 0
        self._engine = engine.execution_options(openenv_write=True)  # SQLite: take the write lock at BEGIN
        self._sql = Dialect.of(engine)
        self._until = 0.0  # time.monotonic() until which this process leads
        now = self._sql.now
        self._take = text(
            "UPDATE service_leases SET "
            "term = CASE WHEN holder = :holder THEN term ELSE term + 1 END, "
            f"acquired_at = CASE WHEN holder = :holder THEN acquired_at ELSE {now} END, "
            f"holder = :holder, expires_at = {now} + :lease_s "
            f"WHERE name = :name AND (holder = :holder OR expires_at <= {now})"
        )
        self._first = text(
            "INSERT INTO service_leases (name, holder, term, acquired_at, expires_at) "
            f"VALUES (:name, :holder, 1, {now}, {now} + :lease_s)"
        )
        self._term = text("SELECT term FROM service_leases WHERE name = :name AND holder = :holder")
        self._resign = text(f"UPDATE service_leases SET expires_at = {now} - 1 WHERE name = :name AND holder = :holder")

    def leading(self) -> bool:
        """Whether this process may start a duty now."""
        return time.monotonic() < self._until

    def renew(self) -> bool:
        """Take or renew the lease; returns whether this process leads. A database that fails
        counts as not leading (the lease then runs out, and whoever reaches the database leads)."""
        sent = time.monotonic()
        params = self._sql.params(name=self.group, holder=self.holder, lease_s=self.lease_s)
        was, term = self.leading(), self.term
        try:
            with self._engine.begin() as conn:
                taken = conn.execute(self._take, params).rowcount == 1
                if not taken:
                    try:
                        with conn.begin_nested():
                            conn.execute(self._first, params)
                        taken = True
                    except IntegrityError:  # the row exists: someone else holds a live lease
                        pass
                if taken:
                    self.term = int(conn.execute(self._term, params).scalar_one())
        except SQLAlchemyError as exc:
            log.warning("could not renew the lease on the periodic duties: %s", exc.__class__.__name__)
            taken = False
        self._until = sent + self.lease_s if taken else 0.0
        if taken and (not was or term != self.term):
            log.info("this process (%s) now runs the periodic duties (term %s)", self.holder, self.term)
        elif was and not taken:
            log.warning("this process (%s) no longer runs the periodic duties", self.holder)
        return taken

    def resign(self) -> None:
        """Let the lease go at once (a graceful stop), so that another process takes over now."""
        self._until = 0.0
        try:
            with self._engine.begin() as conn:
                conn.execute(self._resign, self._sql.params(name=self.group, holder=self.holder))
        except SQLAlchemyError:  # the lease runs out by itself
            log.warning("could not hand the lease on the periodic duties back; it runs out in %ss", self.lease_s)

    def keep(self, stopping: threading.Event) -> None:
        """Renew every third of a lease until `stopping` is set, then resign (blocks)."""
        while True:
            self.renew()
            if stopping.wait(self.lease_s / 3):
                break
        self.resign()

    def wait_leading(self, stopping: threading.Event) -> bool:
        """Block until this process leads (True) or `stopping` is set (False)."""
        tick = min(1.0, self.lease_s / 4)
        while not self.leading():
            if stopping.wait(tick):
                return False
        return True

    def record(self, duty: str, fn: Callable[[Fence], object]) -> bool:
        """Run `fn(fence)` as `duty` if this process leads, noted in `duty_runs`; returns whether it
        ran. `fence` holds this lease's term: `fn` writes through engines it guards (a run that was
        deposed is noted `deposed`)."""
        if not self.leading():
            return False
        now = self._sql.now
        term = self.term
        params = self._sql.params(duty=duty, holder=self.holder, term=term)
        with self._engine.begin() as conn:
            run_id = conn.execute(
                text(
                    "INSERT INTO duty_runs (duty, holder, term, started_at) "
                    f"VALUES (:duty, :holder, :term, {now}) RETURNING id"
                ),
                params,
            ).scalar_one()
        outcome = "failed"
        try:
            fn(Fence(self.group, self.holder, term, duty))
            outcome = "done"
        except Deposed:  # said in the log by the fence; the new leader runs the duty from here
            outcome = "deposed"
        finally:
            with self._engine.begin() as conn:
                conn.execute(
                    text(f"UPDATE duty_runs SET finished_at = {now}, outcome = :outcome WHERE id = :id"),
                    self._sql.params(id=run_id, outcome=outcome),
                )
                conn.execute(
                    text(f"DELETE FROM duty_runs WHERE started_at < {now} - :keep_s"),
                    self._sql.params(keep_s=_KEEP_RUNS_S),
                )
        return True


def run_duty(leadership: Leadership | None, duty: str, fn: Callable[[Fence | None], object]) -> bool:
    """Run `fn(fence)` as the periodic duty `duty`: always without leadership (one process by
    design, `fence` None), else only in the leader (see `Leadership.record`)."""
    if leadership is None:
        fn(None)
        return True
    return leadership.record(duty, fn)
