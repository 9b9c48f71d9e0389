"""Schema changes go through Alembic: upgrading a database that has data keeps every row (SQLite's
table rebuilds included), the migrated schema matches the models, and 0002 downgrades cleanly;
0019 renames the builder "docker" to "container" and back."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from hub_service.db import Base, make_engine, migrate, migrations_dir
from hub_service.models import import_all


def _alembic(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _insert_env(conn: Any, now: str) -> None:
    """One environments row (id 1, alice/echo_env) as the oldest schema holds it."""
    conn.execute(
        text(
            "INSERT INTO environments (id, source, owner, name, tags, likes, private, trusted, status, search_text, indexed_at, created_at, updated_at, gone) "
            "VALUES (1, 'hf', 'alice', 'echo_env', '[]', 0, false, false, 'passing', '', :t, :t, :t, false)"
        ),
        {"t": now},
    )


def test_upgrading_a_database_with_data_keeps_every_row(fresh_url: str) -> None:
    migrate(fresh_url, "0001")
    engine = make_engine(fresh_url)
    now = "2026-01-01T00:00:00+00:00"
    with engine.begin() as conn:
        _insert_env(conn, now)
        conn.execute(
            text(
                "INSERT INTO env_versions (id, env_id, sha, ref, state, created_at, yanked, manifest) "
                "VALUES (1, 1, :sha, 'main', 'passed', :t, false, :m)"
            ),
            {"sha": "a" * 40, "t": now, "m": '{"name": "echo_env", "description": "Says It Back", "tags": ["Parrot"]}'},
        )
        conn.execute(text("UPDATE environments SET latest_version_id = 1"))
        conn.execute(
            text(
                "INSERT INTO jobs (id, kind, version_id, state, priority, attempts, max_attempts, created_at) "
                "VALUES (1, 'pipeline', 1, 'done', 100, 1, 3, :t)"
            ),
            {"t": now},
        )
        conn.execute(
            text(
                "INSERT INTO stage_runs (id, job_id, version_id, attempt, stage, status, log, started_at) "
                "VALUES (1, 1, 1, 1, 'build', 'passed', 'built', :t)"
            ),
            {"t": now},
        )
    engine.dispose()

    migrate(fresh_url)  # 0002 rebuilds `jobs` on SQLite: the stage run pointing at it must survive
    engine = make_engine(fresh_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT job_id, log FROM stage_runs")).all() == [(1, "built")]
            assert conn.execute(text("SELECT version_id, kind, payload FROM jobs")).all() == [(1, "pipeline", None)]
            assert conn.execute(text("SELECT deprecated, health FROM environments")).all() == [(False, None)]
            # 0006 fills the manifest's search words from the revision each env shows
            assert conn.execute(text("SELECT manifest_text FROM environments")).all() == [("says it back #parrot ",)]
            import_all()
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        command.downgrade(_alembic(fresh_url), "0001")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM stage_runs")).scalar() == 1
        migrate(fresh_url)
        # 0017 adds the current revision's RFC 008 results as the catalog's `check=` tokens
        command.downgrade(_alembic(fresh_url), "0016")
        report = '{"results": [{"check_id": "runtime.startup", "status": "pass"}]}'
        with engine.begin() as conn:
            conn.execute(text("UPDATE env_versions SET rfc008 = :r"), {"r": report})
        migrate(fresh_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT manifest_text FROM environments")).all() == [
                ("says it back #parrot chk:runtime.startup:pass ",)
            ]
    finally:
        engine.dispose()


def test_0019_renames_the_docker_builder_to_container_and_back(fresh_url: str) -> None:
    migrate(fresh_url, "0018")
    engine = make_engine(fresh_url)
    now = "2026-01-01T00:00:00+00:00"
    try:
        with engine.begin() as conn:
            _insert_env(conn, now)
            for vid, builder in ((1, "docker"), (2, "process"), (3, None)):
                conn.execute(
                    text(
                        "INSERT INTO env_versions (id, env_id, sha, ref, state, created_at, yanked, builder) "
                        "VALUES (:id, 1, :sha, 'main', 'passed', :t, false, :b)"
                    ),
                    {"id": vid, "sha": str(vid) * 40, "t": now, "b": builder},
                )

        def builders() -> list[tuple[int, str | None]]:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text("SELECT id, builder FROM env_versions ORDER BY id"))]

        def refused(word: str) -> bool:
            try:
                with engine.begin() as conn:
                    conn.execute(text("UPDATE env_versions SET builder = :b WHERE id = 3"), {"b": word})
            except IntegrityError:
                return True
            with engine.begin() as conn:
                conn.execute(text("UPDATE env_versions SET builder = NULL WHERE id = 3"))
            return False

        migrate(fresh_url)
        assert builders() == [(1, "container"), (2, "process"), (3, None)]
        assert refused("docker") and not refused("container")
        with engine.connect() as conn:
            import_all()
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []

        command.downgrade(_alembic(fresh_url), "0018")
        assert builders() == [(1, "docker"), (2, "process"), (3, None)]
        assert refused("container") and not refused("docker")
    finally:
        engine.dispose()
