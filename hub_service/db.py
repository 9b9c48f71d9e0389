"""Database plumbing: the declarative base, engines (SQLite or PostgreSQL), sessions, migrations.

The schema changes only through Alembic (`hub_service/migrations/`); `migrate()` runs `upgrade head`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, cast

from sqlalchemy import JSON, DateTime, MetaData, create_engine, event
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

__all__ = [
    "Base",
    "UTCDateTime",
    "affected_rows",
    "make_engine",
    "migrate",
    "migrations_dir",
    "session_scope",
    "utcnow",
]

_NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def affected_rows(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE matched.

    `Session.execute` types every result as a plain `Result`; for those statements it is a
    `CursorResult`, which has the count.
    """
    return cast("CursorResult[Any]", result).rowcount


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to a UTCDateTime column")
        return value.astimezone(dt.UTC) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=_NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[str]: JSON,
        list[float]: JSON,
        dt.datetime: UTCDateTime,
    }


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with the settings we rely on: SQLite in WAL mode with foreign keys and a busy
    timeout (several worker processes share the file); PostgreSQL with pre-ping."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
            # Let SQLAlchemy's BEGIN (emitted below) control transactions, not pysqlite's own.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # Writers take the write lock up front (BEGIN IMMEDIATE) and so wait their turn under
            # busy_timeout; a deferred transaction that reads and then writes would instead fail
            # at once with "database is locked" whenever another writer got in between.
            mode = "IMMEDIATE" if conn.get_execution_options().get("openenv_write") else "DEFERRED"
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def sessionmaker_for(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session], *, write: bool = True) -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on error.

    `write=True` takes SQLite's write lock when the transaction starts (no effect on PostgreSQL).
    """
    with factory() as session, session.begin():
        if write:
            session.connection(execution_options={"openenv_write": True})
        yield session


def migrations_dir() -> Path:
    """The Alembic scripts (`hub_service/migrations/`), the same in a checkout and in a wheel."""
    return Path(__file__).resolve().parent / "migrations"


def migrate(url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision` with Alembic."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, revision)
