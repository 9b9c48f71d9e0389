"""Alembic environment for the Hub service's database (SQLite or PostgreSQL)."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from hub_service import vocabularies
from hub_service.db import Base, make_engine
from hub_service.errors import HubError
from hub_service.models import import_all

import_all()
config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise HubError("no database URL for the migrations: run them with hub_service.db.migrate(url)")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                _without_sqlite_foreign_keys(connection)
            else:
                _run(connection)
    finally:
        engine.dispose()


def _without_sqlite_foreign_keys(connection: Connection) -> None:
    # SQLite changes a column by copying the table and dropping the old one. With foreign keys on,
    # that drop would delete (cascade) every row pointing at the table, so the pragma goes off for
    # the migration. It only takes effect outside a transaction: set it on the raw connection
    # before Alembic begins one, then check nothing dangles and turn it back on.
    raw: Any = connection.connection.driver_connection  # sqlite3's own connection (None only once closed)
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        _run(connection)
        problems = raw.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"the migration left rows pointing at nothing: {problems[:5]}")
    finally:
        raw.execute("PRAGMA foreign_keys=ON")


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
    # At head, the closed vocabularies' constraints list what the enums list now (a new job or event
    # kind needs no migration of its own); below head, a revision's own lists stand. In a transaction
    # of its own: on SQLite Alembic commits each revision apart and leaves none open for this.
    if connection.in_transaction():
        connection.commit()  # only the reads Alembic began after its last revision
    with connection.begin():
        if set(context.get_context().get_current_heads()) == set(context.script.get_heads()):
            vocabularies.sync(connection, target_metadata)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
