"""`SharedRateLimiter`: token buckets kept in the database, so every Hub process counts the same.

A process does not ask the database for every request: it takes a *lease* of tokens from the
client's bucket in one short transaction and counts the requests it serves from it in memory,
going back to the database only when the lease is spent or old. So that the limit holds across
processes, and none of them starves another:

- every token a process serves was taken out of the shared bucket first (the total is bounded
  by the bucket, however many processes there are);
- a lease takes at most a quarter of what the bucket holds (`_LEASE_SHARE`), so one process can
  never empty it for the others: as a bucket runs low the leases shrink to one token, which is
  the old one-write-per-request bucket, contested request by request;
- a lease grows only while its client keeps spending it (it doubles each time one is spent
  within `lease_s`, up to `max_lease`, and halves each time one is not), so a slow client takes
  one token at a time;
- tokens a lease has not spent by `lease_s` go back to the bucket (at the process's next
  visit to the database for that client, or its next sweep);
- a refused client is refused from memory until its bucket can have refilled enough (tokens
  only come back by refilling, or as another process's small unspent lease), so a flood of
  refused requests costs the database one trip, not one each.

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
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from hub_service.limits import Decision, RateLimiter
from hub_service.quota._sql import Dialect

__all__ = ["SharedRateLimiter"]

log = logging.getLogger("hub_service.limits")

_MAX_CLIENT = 128  # longer client keys (odd socket names) are stored by their hash
_LEASE_SHARE = 0.25  # a lease takes at most this share of the tokens in the bucket
_MAX_LEASES = 100_000  # leases kept in memory (the oldest are given back first)


@dataclass
class _Lease:
    """Tokens this process took from one bucket and has not served yet."""

    tokens: float = 0.0
    expires: float = 0.0  # by the limiter's clock; unspent tokens go back after it
    size: float = 1.0  # what the next lease asks for
    bucket_after: float = 0.0  # what the bucket held when this lease was taken (for the headers)
    refused_until: float = 0.0  # the bucket cannot refill enough before then: refuse without asking


class SharedRateLimiter:
    """Token buckets per (category, client) in `rate_buckets`, leased to this process a few tokens
    at a time; thread-safe.

    Args:
        engine: the Hub's database (SQLite or PostgreSQL).
        rules: category → (capacity, refill per minute), as for `RateLimiter`.
        retry_db_after_s: after a database error, count locally this long before asking again
            (so that an unreachable database costs one timeout, not one per request).
        sweep_every_s: how often this process deletes buckets that are full again.
        lease_s: how long a lease's tokens are served from memory before the rest go back.
        max_lease: the most tokens one lease takes.
    """

    def __init__(
        self,
        engine: Engine,
        rules: dict[str, tuple[int, float]],
        *,
        retry_db_after_s: float = 5.0,
        sweep_every_s: float = 60.0,
        lease_s: float = 1.0,
        max_lease: int = 1000,
    ) -> None:
        self.rules = rules
        self.local = RateLimiter(rules)
        self.lease_s = lease_s
        self.max_lease = max_lease
        self.db_trips = 0  # transactions with the database (leases taken, refusals, give-backs)
        self._engine = engine.execution_options(openenv_write=True)  # SQLite: take the write lock at BEGIN
        self._retry_db_after_s = retry_db_after_s
        self._down_until = 0.0
        self._sweep_every_s = sweep_every_s
        self._next_sweep = time.monotonic() + sweep_every_s
        self._lock = threading.Lock()  # guards _leases (held for dictionary work only, never a round trip)
        self._leases: dict[tuple[str, str], _Lease] = {}
        # SQLite has one writer at a time, and a writer that finds the write lock taken sleeps in
        # SQLite's busy handler (up to 100 ms a try) instead of queueing: this process's trips queue here.
        self._one_writer: AbstractContextManager[object] = (
            threading.Lock() if engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )
        self.use_clock(None)

    def use_clock(self, clock: Callable[[], float] | None) -> None:
        """Count the buckets' time (and the leases') by `clock` (epoch seconds) instead of the
        database's and this process's (None).

        For tests that step time rather than sleep through it: what a refill allows is then exact,
        however slow the machine is between two requests.
        """
        self._sql = d = Dialect.of(self._engine, clock)
        self._clock: Callable[[], float] = clock or time.monotonic
        refilled = (
            f"{d.least}(CAST(:capacity AS DOUBLE PRECISION), rate_buckets.tokens + "
            f"{d.greatest}(0, {d.now} - rate_buckets.updated_at) * :rate)"
        )
        self._create = text(
            "INSERT INTO rate_buckets (category, client, tokens, updated_at) "
            f"VALUES (:category, :client, CAST(:capacity AS DOUBLE PRECISION), {d.now}) "
            "ON CONFLICT (category, client) DO NOTHING"
        )
        self._read = text(
            f"SELECT {refilled}, {d.now} FROM rate_buckets WHERE category = :category AND client = :client"
            + d.for_update
        )
        self._write = text(
            f"UPDATE rate_buckets SET tokens = :tokens, updated_at = {d.greatest}(updated_at, :stamp) "
            "WHERE category = :category AND client = :client"
        )
        self._sweep = text(
            f"DELETE FROM rate_buckets WHERE category = :category AND updated_at < {d.now} - :full_after_s"
        )

    def hit(self, category: str, client: str, cost: float = 1.0) -> Decision:
        """Take `cost` tokens for the client: from this process's lease when it holds them, else from
        the bucket (blocking: call it off the event loop, or use `ahit`)."""
        if time.monotonic() < self._down_until:
            return self.local.hit(category, client, cost)
        key = (category, _client_key(client))
        served = self._from_lease(key, cost)
        if served is not None:
            return served
        try:
            decision = self._lease(key, cost)
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
        """`hit` for async code: served from the lease on the loop; a trip to the database runs in
        a worker thread (it never blocks the loop)."""
        if time.monotonic() >= self._down_until:
            served = self._from_lease((category, _client_key(client)), cost)
            if served is not None:
                return served
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.hit, category, client, cost)

    def give_back(self) -> None:
        """Return every lease's unspent tokens to the buckets now (a process that stops serving)."""
        with self._lock:
            held = [(key, lease.tokens) for key, lease in self._leases.items() if lease.tokens > 0]
            for key, _ in held:
                self._leases[key].tokens = 0.0
        self._return(held)

    def _from_lease(self, key: tuple[str, str], cost: float) -> Decision | None:
        capacity, per_minute = self.rules[key[0]]
        with self._lock:
            lease = self._leases.get(key)
            if lease is None:
                return None
            now = self._clock()
            if now < lease.refused_until:
                return _decision(
                    False, capacity, per_minute, cost - (lease.refused_until - now) * per_minute / 60, cost
                )
            if lease.tokens < cost or now >= lease.expires:
                return None
            lease.tokens -= cost
            left = lease.bucket_after + lease.tokens
        return _decision(True, capacity, per_minute, left, cost)

    def _lease(self, key: tuple[str, str], cost: float) -> Decision:
        """One transaction: give back what the old lease did not spend, then take a new one."""
        category, client = key
        capacity, per_minute = self.rules[category]
        rate = per_minute / 60.0
        now = self._clock()
        with self._lock:
            lease = self._leases.pop(key, None) or _Lease()
            unspent, lease.tokens = lease.tokens, 0.0
            # Spent before it was old: the client is busy, ask for more next time; else for less.
            lease.size = min(self.max_lease, lease.size * 2) if now < lease.expires else max(1.0, lease.size / 2)
            self._leases[key] = lease
            stale = self._evict()
        params = self._sql.params(category=category, client=client, capacity=capacity, rate=rate)
        with self._one_writer, self._engine.begin() as conn:
            self.db_trips += 1
            row = conn.execute(self._read, params).first()
            if row is None:
                conn.execute(self._create, params)
                row = conn.execute(self._read, params).one()
            tokens, stamp = min(capacity, float(row[0]) + unspent), float(row[1])
            allowed = tokens >= cost
            take = 0.0
            if allowed:
                take = max(cost, min(lease.size, math.floor(tokens * _LEASE_SHARE)))
            if allowed or unspent:
                conn.execute(self._write, {**params, "tokens": tokens - take, "stamp": stamp})
        with self._lock:
            if allowed:  # added: another thread may have leased for the same client meanwhile
                lease.tokens += take - cost
            elif rate > 0:  # no need to ask again before the bucket can have refilled enough
                lease.refused_until = now + (cost - tokens) / rate
            lease.expires = now + self.lease_s
            lease.bucket_after = tokens - take
        self._return(stale)
        return _decision(allowed, capacity, per_minute, tokens - take if allowed else tokens, cost)

    def _evict(self) -> list[tuple[tuple[str, str], float]]:
        """Leases past `_MAX_LEASES`, oldest first, with what they held (call with the lock held)."""
        out = []
        while len(self._leases) > _MAX_LEASES:
            key = next(iter(self._leases))
            out.append((key, self._leases.pop(key).tokens))
        return out

    def _return(self, held: list[tuple[tuple[str, str], float]]) -> None:
        held = [(key, tokens) for key, tokens in held if tokens > 0]
        if not held:
            return
        with self._one_writer, self._engine.begin() as conn:
            self.db_trips += 1
            for (category, client), tokens in held:
                capacity, per_minute = self.rules[category]
                params = self._sql.params(category=category, client=client, capacity=capacity, rate=per_minute / 60.0)
                row = conn.execute(self._read, params).first()
                if row is not None:
                    back = min(capacity, float(row[0]) + tokens)
                    conn.execute(self._write, {**params, "tokens": back, "stamp": float(row[1])})

    def _maybe_sweep(self) -> None:
        """Give back old leases' tokens, and delete buckets that are full again (no different from
        no bucket), now and then."""
        with self._lock:
            if time.monotonic() < self._next_sweep:
                return
            self._next_sweep = time.monotonic() + self._sweep_every_s
            now = self._clock()
            old = [key for key, lease in self._leases.items() if now >= lease.expires]
            held = [(key, self._leases.pop(key).tokens) for key in old]
        self._return(held)
        with self._engine.begin() as conn:
            for category, (capacity, per_minute) in self.rules.items():
                full_after_s = capacity / (per_minute / 60.0) + 1.0
                conn.execute(self._sweep, self._sql.params(category=category, full_after_s=full_after_s))


def _decision(allowed: bool, capacity: int, per_minute: float, tokens: float, cost: float) -> Decision:
    """The reply's figures when `tokens` are left (after this request's, when it was allowed)."""
    rate = per_minute / 60.0
    reset = math.ceil((capacity - tokens) / rate) if rate > 0 else 0
    retry = max(1, math.ceil((cost - tokens) / rate)) if not allowed and rate > 0 else (0 if allowed else 1)
    return Decision(allowed, capacity, max(0, int(tokens)), max(0, reset), retry)


def _client_key(client: str) -> str:
    if len(client) <= _MAX_CLIENT:
        return client
    return "sha256:" + hashlib.sha256(client.encode()).hexdigest()
