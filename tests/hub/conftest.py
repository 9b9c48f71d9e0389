"""Hub service fixtures: a migrated database on SQLite and on PostgreSQL, a session per test in a
rolled-back transaction, and clean databases for end-to-end tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.settings import HubSettings

_TABLES = ("stage_runs", "jobs", "env_versions", "environments")


def _postgres_url() -> str | None:
    return os.environ.get("TEST_DATABASE_URL")


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database; every hub test runs on both backends."""
    if request.param == "postgresql":
        base = _postgres_url()
        if not base:
            pytest.skip("PostgreSQL not configured: set TEST_DATABASE_URL (scripts/test does)")
        url = _private_database(base, request)
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('hubdb') / 'hub.sqlite3'}"
    migrate(url)
    return url


def _private_database(base_url: str, request: pytest.FixtureRequest) -> str:
    """A fresh database of this test run's own on the server (test runs may share the server),
    dropped at the end; starting from nothing also tests the migrations."""
    from sqlalchemy.engine import make_url

    name = f"openenv_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = make_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()

    def drop() -> None:
        eng = make_engine(base_url, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        eng.dispose()

    request.addfinalizer(drop)
    return make_url(base_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture()
def session(engine: Engine) -> Iterator[Session]:
    """A session inside a transaction that is rolled back after the test."""
    conn = engine.connect()
    outer = conn.begin()
    sess = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield sess
    finally:
        sess.close()
        outer.rollback()
        conn.close()


def truncate(engine: Engine) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text(f"TRUNCATE {', '.join(_TABLES)} RESTART IDENTITY CASCADE"))
        else:
            for table in _TABLES:
                conn.execute(text(f"DELETE FROM {table}"))


@pytest.fixture()
def clean_factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    """A session factory on emptied tables, for tests that commit (workers, servers)."""
    truncate(engine)
    yield sessionmaker_for(engine)
    truncate(engine)


@pytest.fixture()
def hub_settings(db_url: str, tmp_path: Path) -> HubSettings:
    return HubSettings(
        data_dir=tmp_path / "hubdata", database_url=db_url, local_source=str(tmp_path / "envs"),
        base_image=os.environ.get("OPENENV_TEST_BASE_IMAGE"), job_stale_after_s=2, heartbeat_s=0.5,
    )
