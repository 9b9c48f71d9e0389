"""`SharedRateLimiter`: token buckets kept in the database, so every Hub process counts the same.

A hit is one statement (an upsert that refills the bucket by the time passed and takes a token
only when one is there); a refused hit reads the bucket once more to say when to come back.
While the database cannot be reached the limiter counts in this process's memory instead (the
limits then hold per process, as before) and says so in the log: the limiter never turns a
request into an error of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from hub_service.limits import Decision, RateLimiter
from hub_service.quota._sql import Dialect

__all__ = ["SharedRateLimiter"]

log = logging.getLogger("hub_service.limits")

_MAX_CLIENT = 128  # longer client keys (odd socket names) are stored by their hash


class SharedRateLimiter:
    """Token buckets per (category, client) in `rate_buckets`; thread-safe, one round trip a hit.

    Args:
        engine: the Hub's database (SQLite or PostgreSQL).
        rules: category → (capacity, refill per minute), as for `RateLimiter`.
        retry_db_after_s: after a database error, count locally this long before asking again
            (so that an unreachable database costs one timeout, not one per request).
        sweep_every_s: how often this process deletes buckets that are full again.
    """

    def __init__(
        self,
        engine: Engine,
        rules: dict[str, tuple[int, float]],
        *,
        retry_db_after_s: float = 5.0,
        sweep_every_s: float = 60.0,
    ) -> None:
        self.rules = rules
        self.local = RateLimiter(rules)
        self._engine = engine.execution_options(openenv_write=True)  # SQLite: take the write lock at BEGIN
        self._retry_db_after_s = retry_db_after_s
        self._down_until = 0.0
        self._sweep_every_s = sweep_every_s
        self._next_sweep = time.monotonic() + sweep_every_s
        self._lock = threading.Lock()
        # SQLite has one writer at a time, and a writer that finds the write lock taken sleeps in
        # SQLite's busy handler (up to 100 ms a try) instead of queueing. This process's hits queue
        # here, each woken as the one before it commits (other processes still meet busy_timeout).
        # Measured with benchmarks/hub_load.py, 32 clients: a catalog read's p99 went from 1.3-1.5 s
        # to 0.26-0.35 s (the level before the buckets moved into the database), p50 up 20-45 ms.
        self._one_writer: AbstractContextManager[object] = (
            threading.Lock() if engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )
        self.use_clock(None)

    def use_clock(self, clock: Callable[[], float] | None) -> None:
        """Count the buckets' time by `clock` (epoch seconds) instead of the database's (None).

        For tests that step time rather than sleep through it: what a refill allows is then exact,
        however slow the machine is between two requests.
        """
        self._sql = d = Dialect.of(self._engine, clock)
        refilled = (
            f"{d.least}(CAST(:capacity AS DOUBLE PRECISION), rate_buckets.tokens + "
            f"{d.greatest}(0, {d.now} - rate_buckets.updated_at) * :rate)"
        )
        self._take = text(
            "INSERT INTO rate_buckets (category, client, tokens, updated_at) "
            f"VALUES (:category, :client, CAST(:capacity AS DOUBLE PRECISION) - :cost, {d.now}) "
            "ON CONFLICT (category, client) DO UPDATE SET "
            f"tokens = {refilled} - :cost, updated_at = {d.greatest}(rate_buckets.updated_at, {d.now}) "
            f"WHERE {refilled} >= :cost RETURNING tokens"
        )
        self._peek = text(f"SELECT {refilled} FROM rate_buckets WHERE category = :category AND client = :client")
        self._sweep = text(
            f"DELETE FROM rate_buckets WHERE category = :category AND updated_at < {d.now} - :full_after_s"
        )

    def hit(self, category: str, client: str, cost: float = 1.0) -> Decision:
        """Take `cost` tokens from the client's bucket if it has them (blocking: call it off the event loop)."""
        if time.monotonic() < self._down_until:
            return self.local.hit(category, client, cost)
        try:
            decision = self._hit(category, _client_key(client), cost)
        except SQLAlchemyError as exc:
            self._down_until = time.monotonic() + self._retry_db_after_s
            log.warning(
                "rate limits: the database did not answer (%s); counting in this process only for the next %gs",
                type(exc).__name__,
                self._retry_db_after_s,
            )
            return self.local.hit(category, client, cost)
        try:
            self._maybe_sweep()
        except SQLAlchemyError:  # the buckets wait for the next sweep; this hit was counted
            log.warning("rate limits: deleting full buckets failed", exc_info=True)
        return decision

    async def ahit(self, category: str, client: str, cost: float = 1.0) -> Decision:
        """`hit` in a worker thread, for async code (the database round trip never blocks the loop)."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.hit, category, client, cost)

    def _hit(self, category: str, client: str, cost: float) -> Decision:
        capacity, per_minute = self.rules[category]
        rate = per_minute / 60.0
        params = self._sql.params(category=category, client=client, capacity=capacity, rate=rate, cost=cost)
        with self._one_writer, self._engine.begin() as conn:
            row = conn.execute(self._take, params).first()
            tokens = float(row[0]) if row is not None else float(conn.execute(self._peek, params).scalar_one())
        allowed = row is not None
        reset = math.ceil((capacity - tokens) / rate) if rate > 0 else 0
        retry = max(1, math.ceil((cost - tokens) / rate)) if not allowed and rate > 0 else (0 if allowed else 1)
        return Decision(allowed, capacity, max(0, int(tokens)), max(0, reset), retry)

    def _maybe_sweep(self) -> None:
        """Delete buckets that are full again (no different from no bucket), now and then."""
        with self._lock:
            if time.monotonic() < self._next_sweep:
                return
            self._next_sweep = time.monotonic() + self._sweep_every_s
        with self._engine.begin() as conn:
            for category, (capacity, per_minute) in self.rules.items():
                full_after_s = capacity / (per_minute / 60.0) + 1.0
                conn.execute(self._sweep, self._sql.params(category=category, full_after_s=full_after_s))


def _client_key(client: str) -> str:
    if len(client) <= _MAX_CLIENT:
        return client
    return "sha256:" + hashlib.sha256(client.encode()).hexdigest()
