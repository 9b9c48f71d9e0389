"""The bits of SQL that differ between PostgreSQL and SQLite in the shared-limits statements."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["Dialect"]


@dataclass(frozen=True)
class Dialect:
    """`now`: the current time in epoch seconds as SQL; `least` / `greatest`: two-argument min / max;
    `clock`: what gives `:now` when `now` is a parameter (None: the database's own clock);
    `for_update`: what locks a row read in a transaction until it ends (SQLite's writer holds them all)."""

    now: str
    least: str
    greatest: str
    postgres: bool
    clock: Callable[[], float] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, engine: Engine, clock: Callable[[], float] | None = None) -> Dialect:
        """`clock` (epoch seconds) replaces the database's clock: tests step time with it instead of sleeping."""
        if engine.dialect.name == "postgresql":
            if clock is not None:
                return cls("CAST(:now AS DOUBLE PRECISION)", "least", "greatest", True, clock)
            # The database's clock, so that API hosts whose clocks differ still agree on every bucket.
            return cls("CAST(extract(epoch from statement_timestamp()) AS DOUBLE PRECISION)", "least", "greatest", True)
        # A SQLite file is shared only by processes of one host: they share its clock.
        return cls(":now", "min", "max", False, clock or time.time)

    @property
    def for_update(self) -> str:
        return " FOR UPDATE" if self.postgres else ""

    def params(self, **values: Any) -> dict[str, Any]:
        return values if self.clock is None else {**values, "now": self.clock()}
