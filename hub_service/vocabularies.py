"""Closed word lists in the database: each is one `StrEnum`, and the CHECK constraint that keeps a
column to it is made from that enum and nothing else.

A model declares `closed_vocabulary("kind", JobKind)` in its `__table_args__`. The constraint
carries the enum's values, and `sync(connection, metadata)` (run by the migrations each time they
reach head) makes the database's constraint list the same ones: a new job kind or event kind is one
enum member, with no migration written by hand. Rows outside a new list stop the upgrade, named.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, MetaData, inspect, text
from sqlalchemy.engine import Connection

__all__ = ["closed_vocabulary", "sync"]

_INFO = "closed_vocabulary"  # CheckConstraint.info key: (column, values, nullable)
_QUOTED = re.compile(r"'([^']*)'")


def _condition(column: str, values: tuple[str, ...], nullable: bool) -> str:
    check = f"{column} IN ({', '.join(repr(v) for v in values)})"
    return f"{column} IS NULL OR {check}" if nullable else check


def closed_vocabulary(column: str, values: type[StrEnum], *, nullable: bool = False) -> CheckConstraint:
    """The CHECK constraint that `column` holds one of `values` (or NULL when `nullable`), named
    `ck_<table>_<column>` by the metadata's naming convention."""
    words = tuple(v.value for v in values)
    return CheckConstraint(_condition(column, words, nullable), name=column, info={_INFO: (column, words, nullable)})


def sync(connection: Connection, metadata: MetaData) -> list[str]:
    """Make every closed-vocabulary constraint of `metadata` in the database list what its enum
    lists now; returns the constraints made anew. Runs inside the caller's transaction.

    Raises:
        RuntimeError: rows hold a value outside the new list (named, with what to do); nothing
            is changed then.
    """
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    inspector = inspect(connection)
    changed: list[str] = []
    for table in metadata.sorted_tables:
        wanted = [c for c in table.constraints if isinstance(c, CheckConstraint) and _INFO in c.info]
        if not wanted:
            continue
        found = {str(c["name"]): str(c["sqltext"]) for c in inspector.get_check_constraints(table.name)}
        stale = []
        for constraint in wanted:
            column, values, nullable = constraint.info[_INFO]
            name = str(constraint.name)
            held = found.get(name)
            if (
                held is not None
                and set(_QUOTED.findall(held)) == set(values)
                and ("NULL" in _QUOTED.sub("", held).upper()) == nullable
            ):
                continue
            _refuse_rows_outside(connection, table.name, column, values, nullable)
            stale.append((name, held is not None, _condition(column, values, nullable)))
        if not stale:
            continue
        ops = Operations(MigrationContext.configure(connection, opts={"render_as_batch": True}))
        with ops.batch_alter_table(table.name) as batch:
            for name, exists, condition in stale:
                if exists:
                    batch.drop_constraint(ops.f(name), type_="check")
                batch.create_check_constraint(ops.f(name), condition)
        changed += [name for name, *_ in stale]
    return changed


def _refuse_rows_outside(
    connection: Connection, table: str, column: str, values: tuple[str, ...], nullable: bool
) -> None:
    outside: Any = connection.execute(
        text(f"SELECT DISTINCT {column} FROM {table} WHERE NOT ({_condition(column, values, nullable)})")
    ).scalars()
    found = sorted(str(v) for v in outside)
    if found:
        raise RuntimeError(
            f"{table}.{column} holds {', '.join(found)}, outside its vocabulary ({', '.join(values)}): "
            "add the value back to the enum, or change those rows, then upgrade again"
        )
