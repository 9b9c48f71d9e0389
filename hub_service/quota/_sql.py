"""The bits of SQL that differ between PostgreSQL and SQLite in the shared-limits statements."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["Dialect"]


@dataclass(frozen=True)
class Dialect:
    """`now`: the current time in epoch seconds as SQL; `least` / `greatest`: two-argument min / max."""

    now: str
    least: str
    greatest: str
    postgres: bool

    @classmethod
    def of(cls, engine: Engine) -> Dialect:
        if engine.dialect.name == "postgresql":
            # The database's clock, so that API hosts whose clocks differ still agree on every bucket.
            return cls("CAST(extract(epoch from statement_timestamp()) AS DOUBLE PRECISION)", "least", "greatest", True)
        # A SQLite file is shared only by processes of one host: they share its clock.
        return cls(":now", "min", "max", False)

    def params(self, **values: Any) -> dict[str, Any]:
        return values if self.postgres else {**values, "now": time.time()}
