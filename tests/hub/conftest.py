"""Hub service fixtures: a migrated database on SQLite and on PostgreSQL, a session per test in a
rolled-back transaction, and clean databases for end-to-end tests."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.settings import HubSettings
from tests.hub.live import live  # noqa: F401  (fixture: the stand-in Hub wired to a running service)
from tests.support.systems import require_system

_TABLES = (
    "image_lock_entries",
    "image_locks",
    "stage_runs",
    "jobs",
    "pr_checks",
    "env_events",
    "health_transitions",
    "env_versions",
    "environments",
    "webhook_deliveries",
    "webhook_subjects",
    "reconcile_drift",
    "crawl_pages",
    "source_crawls",
    "rate_buckets",
    "play_leases",
    "service_leases",
    "duty_runs",
    "registry_deletions",
)


def _postgres_url() -> str | None:
    return os.environ.get("TEST_DATABASE_URL")


class _Databases:
    """This test process's two migrated databases, made on first use and kept to the end: a test
    on SQLite and one on PostgreSQL may follow each other in any order (a parallel worker runs one
    file's tests, both backends, then another file's), and switching never migrates anew."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._urls: dict[str, str] = {}
        self._engines: dict[str, Engine] = {}
        self._drops: list[str] = []

    def url(self, kind: str) -> str:
        if kind not in self._urls:
            if kind == "postgresql":
                base = _postgres_url()
                if not base:
                    require_system(
                        "PostgreSQL", "TEST_DATABASE_URL is not set (scripts/test starts a server and sets it)"
                    )
                url = self._private_database(base)
            else:
                url = f"sqlite:///{self._tmp.mktemp('hubdb') / 'hub.sqlite3'}"
            migrate(url)
            self._urls[kind] = url
        return self._urls[kind]

    def engine(self, url: str) -> Engine:
        if url not in self._engines:
            self._engines[url] = make_engine(url)
        return self._engines[url]

    def _private_database(self, base_url: str) -> str:
        """A fresh database of this test process's own on the server (test runs and workers share
        the server), dropped at the end; starting from nothing also tests the migrations."""
        from sqlalchemy.engine import make_url

        name = f"openenv_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        admin = make_engine(base_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        self._drops.append(base_url + "\n" + name)
        return make_url(base_url).set(database=name).render_as_string(hide_password=False)

    def close(self) -> None:
        for eng in self._engines.values():
            eng.dispose()
        for entry in self._drops:
            base_url, name = entry.split("\n", 1)
            eng = make_engine(base_url, isolation_level="AUTOCOMMIT")
            with eng.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            eng.dispose()


@pytest.fixture(scope="session")
def _databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Databases]:
    dbs = _Databases(tmp_path_factory)
    try:
        yield dbs
    finally:
        dbs.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
        return
    from sqlalchemy.engine import make_url

    base = os.environ.get("TEST_DATABASE_URL")
    if not base:
        require_system("PostgreSQL", "TEST_DATABASE_URL is not set (scripts/test starts a server and sets it)")
    name = f"openenv_mig_{uuid.uuid4().hex[:10]}"
    admin = make_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, _databases: _Databases) -> str:
    """A migrated database; every hub test runs on both backends."""
    return _databases.url(request.param)


@pytest.fixture()
def engine(db_url: str, _databases: _Databases) -> Engine:
    return _databases.engine(db_url)


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
    """Empty the tables. On PostgreSQL, a transaction a failed test left open (a session it never
    closed, a worker it could not stop) would block TRUNCATE forever: after a short wait such
    connections are ended, so that one failure never hangs the rest of the run."""
    if engine.dialect.name != "postgresql":
        with engine.begin() as conn:
            for table in _TABLES:
                conn.execute(text(f"DELETE FROM {table}"))
        return
    from sqlalchemy.exc import OperationalError

    statement = text(f"TRUNCATE {', '.join(_TABLES)} RESTART IDENTITY CASCADE")
    try:
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '10s'"))
            conn.execute(statement)
        return
    except OperationalError:  # lock_timeout: someone still holds the tables
        pass
    with engine.begin() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    engine.dispose()  # pooled connections of this process may have been among them
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL lock_timeout = '30s'"))
        conn.execute(statement)


@pytest.fixture()
def clean_factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    """A session factory on emptied tables, for tests that commit (workers, servers)."""
    truncate(engine)
    yield sessionmaker_for(engine)
    truncate(engine)


# One image namespace per test process (see hub_settings).
IMAGE_PREFIX = f"openenv-hub-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


@pytest.fixture(scope="session", autouse=True)
def _images_of_this_process_go_at_the_end() -> Iterator[None]:
    """The images this process's Hubs built, removed when its tests end: each run's revisions are
    new images, and left behind they piled up (hundreds over a day of runs, until the disk was full)."""
    yield
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        return  # no engine was set up for this run
    import docker

    from tests.support.images import remove_tagged

    try:
        client = docker.from_env()
    except docker.errors.DockerException:  # the engine is gone: nothing of ours to remove there
        return
    try:
        remove_tagged(client, IMAGE_PREFIX)
    except docker.errors.APIError as exc:  # said, not failed: the tests have passed or failed already
        print(f"\ntests/hub: could not remove the {IMAGE_PREFIX}/ images: {exc}", file=sys.stderr)


@pytest.fixture()
def hub_settings(db_url: str, engine: Engine, tmp_path: Path) -> HubSettings:
    # Rate-limit buckets and play leases live in the database: each test starts with none, as a
    # fresh Hub would (the database outlives the test).
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM rate_buckets"))
        conn.execute(text("DELETE FROM play_leases"))
    return HubSettings(
        # One image namespace per test process: the parallel workers build the same envs (same tags)
        # and prune their own Hub's images, which must never be another worker's.
        image_prefix=IMAGE_PREFIX,
        data_dir=tmp_path / "hubdata",
        database_url=db_url,
        local_source=str(tmp_path / "envs"),
        base_image=os.environ.get("OPENENV_TEST_BASE_IMAGE"),
        job_stale_after_s=2,
        heartbeat_s=0.5,
        # The trust checks (a few seconds per smoke test, hundreds of sessions) are the subject of
        # tests/hub/test_trust.py, which turns them on (TRUST_ON); the other pipeline tests go without.
        determinism_check=False,
        reward_check=False,
        capacity_check=False,
        # So is RFC 008's statistical level (hundreds of episodes a revision): tests/hub/test_rfc008_statistical.py,
        # and the pipeline's report test, turn it on.
        statistical_episodes=0,
    )
