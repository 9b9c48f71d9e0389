"""Issue 48 (item 5): a closed word list is one enum, and the database's CHECK constraint is made
from it. A database whose constraint lists fewer values (made before a kind was added) gets the
enum's list at the next migration; rows outside a list stop the upgrade, named; on SQLite and
PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import CheckConstraint, Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from hub_service.audit.models import EventKind
from hub_service.db import Base, make_engine, migrate
from hub_service.models import import_all
from hub_service.queue.kinds import JobKind


@pytest.fixture()
def fresh(fresh_url: str) -> Iterator[tuple[str, Engine]]:
    """A database of this test's own, migrated to head (its constraints are changed below)."""
    migrate(fresh_url)
    engine = make_engine(fresh_url)
    try:
        yield fresh_url, engine
    finally:
        engine.dispose()


_INSERT_JOB = text(
    "INSERT INTO jobs (kind, state, priority, attempts, max_attempts, infra_retries, infra_waits, created_at)"
    " VALUES (:kind, 'queued', 1, 0, 3, 0, 0, CURRENT_TIMESTAMP)"
)


def _listed(engine: Engine, table: str, name: str) -> list[str]:
    found = {str(c["name"]): str(c["sqltext"]) for c in inspect(engine).get_check_constraints(table)}
    return sorted(re.findall(r"'([^']*)'", found[name]))


def _set_constraint(engine: Engine, table: str, name: str, condition: str) -> None:
    """Put the database's constraint back to what an older Hub made (an older migration's list)."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")  # the batch copy must not cascade
        ops = Operations(MigrationContext.configure(conn, opts={"render_as_batch": True}))
        with ops.batch_alter_table(table) as batch:
            batch.drop_constraint(ops.f(name), type_="check")
            batch.create_check_constraint(ops.f(name), condition)


def test_every_closed_list_in_the_database_is_its_enum(fresh: tuple[str, Engine]) -> None:
    """Alembic's comparison skips CHECK constraints: each one the models make from an enum is
    compared here with the migrated database's, the audit trail's event kinds included."""
    _, engine = fresh
    import_all()
    compared = 0
    for table in Base.metadata.sorted_tables:
        for c in table.constraints:
            if isinstance(c, CheckConstraint) and "closed_vocabulary" in c.info:
                assert _listed(engine, table.name, str(c.name)) == sorted(c.info["closed_vocabulary"][1]), c.name
                compared += 1
    assert compared >= 9
    assert _listed(engine, "env_events", "ck_env_events_kind") == sorted(EventKind)


def test_a_kind_added_to_the_enum_reaches_the_database_at_the_next_migration(fresh: tuple[str, Engine]) -> None:
    url, engine = fresh
    _set_constraint(engine, "jobs", "ck_jobs_kind", "kind IN ('pipeline', 'index_repo')")  # before pr_sync existed
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(_INSERT_JOB, {"kind": "pr_sync"})
    migrate(url)
    assert _listed(engine, "jobs", "ck_jobs_kind") == sorted(JobKind)
    with engine.begin() as conn:
        conn.execute(_INSERT_JOB, {"kind": "pr_sync"})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET kind = 'bogus'"))


def test_rows_outside_the_new_list_stop_the_upgrade_and_are_named(fresh: tuple[str, Engine]) -> None:
    url, engine = fresh
    wider = "kind IN ('pipeline', 'index_repo', 'pr_sync', 'pr_report', 'retired_kind')"
    _set_constraint(engine, "jobs", "ck_jobs_kind", wider)  # a kind an older Hub had and this one dropped
    with engine.begin() as conn:
        conn.execute(_INSERT_JOB, {"kind": "retired_kind"})
    with pytest.raises(RuntimeError, match=r"jobs\.kind holds retired_kind, outside its vocabulary"):
        migrate(url)
    assert "retired_kind" in _listed(engine, "jobs", "ck_jobs_kind")  # nothing changed
    with engine.connect() as conn:
        assert conn.execute(text("SELECT kind FROM jobs")).scalars().all() == ["retired_kind"]
