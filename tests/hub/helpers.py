"""Test helpers for the Hub: a list-backed source, and env folders written on the fly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from hub_service.indexer.sources import SourceEnv


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
