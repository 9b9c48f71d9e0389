"""Test helpers for the Hub: a list-backed source, a served Hub that lists given Spaces, and env
folders written on the fly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import Engine, bindparam, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from hub_service.app import create_app
from hub_service.catalog.discovery import read_discovery
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import SourceEnv
from hub_service.settings import HubSettings
from tests.support.servers import ROOT, serve_app


class ListSource:
    """A source whose contents the test sets (the real sources have their own tests)."""

    name = "hf"
    trusted = False

    def __init__(self, envs: list[SourceEnv] | None = None) -> None:
        self.envs = list(envs or [])
        self.listings = 0

    def list(self) -> Iterator[SourceEnv]:
        self.listings += 1
        yield from self.envs

    def fetch(self, owner: str, name: str, sha: str, dest: Path) -> Path:
        raise NotImplementedError("ListSource has no files")


def space(i: int, **overrides: object) -> SourceEnv:
    base = dict(
        owner=f"user{i % 7}",
        name=f"env_{i:05d}",
        sha=f"{i:040x}",
        tags=["openenv", f"t{i % 3}"],
        likes=i % 50,
        stage="RUNNING" if i % 2 else "SLEEPING",
        subdomain=f"user{i % 7}-env-{i:05d}",
        host=f"https://user{i % 7}-env-{i:05d}.hf.space",
        title=f"Env {i}",
        description="a chess puzzle" if i % 10 == 0 else "a grid world",
        last_modified=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i),
    )
    base.update(overrides)
    return SourceEnv(**base)  # type: ignore[arg-type]


@contextmanager
def listing_hub(
    tmp_path: Path, spaces: list[SourceEnv], prepare: Callable[[Session], None], **settings: Any
) -> Iterator[tuple[str, sessionmaker[Session]]]:
    """A Hub service on a migrated SQLite database that indexed `spaces`; `prepare` sets up their
    versions (states, images) in one transaction first; `settings` are further Hub settings. Yields
    the Hub's URL and its session factory."""
    url = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(url)
    engine = make_engine(url)
    factory = sessionmaker_for(engine)
    index_source(factory, ListSource(spaces))
    with factory.begin() as session:
        prepare(session)
    hub_settings = HubSettings(
        data_dir=tmp_path / "data", database_url=url, local_source=None, website=False, **settings
    )
    try:
        with serve_app(create_app(hub_settings, run_migrations=False)) as served:
            yield served, factory
    finally:
        engine.dispose()


def seed_passing_envs(engine: Engine, n: int) -> list[str]:
    """`n` public envs whose current revision passed, inserted in bulk (for tests and benchmarks
    whose subject is not the pipeline: the catalog snapshot at 50,000 envs takes seconds), each with echo_env's real manifest and discovery record: entries of today's real
    size, about 1.6 KB each. Returns their ids."""
    manifest = yaml.safe_load((ROOT / "envs" / "echo_env" / "openenv.yaml").read_text())
    discovery = read_discovery(ROOT / "envs" / "echo_env")
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    envs = [
        dict(
            source="hf", owner=f"user{i % 97}", name=f"env_{i:05d}", title=f"Env {i}", tags=["openenv"],
            status="passing", sha=f"{i:040x}", indexed_at=now, created_at=now, updated_at=now,
        )
        for i in range(n)
    ]  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(EnvRecord), envs)
        ids = dict(conn.execute(select(EnvRecord.name, EnvRecord.id)).all())
        versions = [
            dict(
                env_id=ids[f"env_{i:05d}"], sha=f"{i:040x}", ref="main", state="passed", created_at=now,
                finished_at=now, manifest=manifest, discovery=discovery,
                registry_ref=f"127.0.0.1:5000/openenv/env_{i:05d}:{i:040x}", image_digest=f"sha256:{i:064x}",
            )
            for i in range(n)
        ]  # fmt: skip
        conn.execute(insert(EnvVersion), versions)
        latest = [{"env": e, "version": v} for e, v in conn.execute(select(EnvVersion.env_id, EnvVersion.id))]
        conn.execute(
            update(EnvRecord).where(EnvRecord.id == bindparam("env")).values(latest_version_id=bindparam("version")),
            latest,
        )
    return [f"{e['owner']}/{e['name']}" for e in envs]
