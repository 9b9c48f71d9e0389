"""Incremental indexing: new, unchanged, changed, gone, back again; the local source."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import func, select

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource, folder_sha
from hub_service.queue.models import Job
from tests.hub.helpers import ListSource, space
from tests.support.servers import ROOT


def counts(factory) -> tuple[int, int, int]:
    with factory() as s:
        return (
            s.scalar(select(func.count()).select_from(EnvRecord)),
            s.scalar(select(func.count()).select_from(EnvVersion)),
            s.scalar(select(func.count()).select_from(Job)),
        )


def test_first_index_creates_envs_versions_and_jobs(clean_factory) -> None:
    source = ListSource([space(i) for i in range(30)])
    report = index_source(clean_factory, source)
    assert (report.seen, report.new, report.jobs, report.gone) == (30, 30, 30, 0)
    assert counts(clean_factory) == (30, 30, 30)
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00003"))
        assert env.status == "pending" and env.stage == "RUNNING" and env.host == "https://user3-env-00003.hf.space"
        assert env.trusted is False and "#t0 " in env.search_text


def test_unchanged_index_does_no_work(clean_factory) -> None:
    source = ListSource([space(i) for i in range(30)])
    index_source(clean_factory, source)
    again = index_source(clean_factory, source)
    assert (again.new, again.changed, again.jobs, again.refreshed) == (0, 0, 0, 0)
    assert again.unchanged == 30
    assert counts(clean_factory) == (30, 30, 30)


def test_cheap_fields_refresh_without_a_job(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]))
    report = index_source(clean_factory, ListSource([space(1, likes=999, stage="BUILDING")]))
    assert (report.refreshed, report.jobs) == (1, 0)
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord))
        assert (env.likes, env.stage) == (999, "BUILDING")


def test_changed_sha_gets_a_new_version_and_job(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1), space(2)]))
    report = index_source(clean_factory, ListSource([space(1, sha="f" * 40), space(2)]))
    assert (report.changed, report.jobs) == (1, 1)
    assert counts(clean_factory) == (2, 3, 3)


def test_removed_env_is_marked_gone_never_deleted_and_can_return(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1), space(2)]))
    report = index_source(clean_factory, ListSource([space(1)]))
    assert report.gone == 1
    with clean_factory() as s:
        gone = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00002"))
        assert gone.gone and gone.gone_at is not None
    assert counts(clean_factory)[0] == 2
    back = index_source(clean_factory, ListSource([space(1), space(2)]))
    assert (back.returned, back.jobs) == (1, 0)
    with clean_factory() as s:
        assert not s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00002")).gone


def test_revert_to_a_known_sha_reuses_its_version(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]))
    index_source(clean_factory, ListSource([space(1, sha="e" * 40)]))
    report = index_source(clean_factory, ListSource([space(1)]))  # back to the first sha
    assert (report.changed, report.jobs) == (1, 0)
    assert counts(clean_factory) == (1, 2, 2)


def test_duplicates_in_a_listing_are_indexed_once(clean_factory) -> None:
    report = index_source(clean_factory, ListSource([space(1), space(1)]))
    assert (report.seen, report.jobs) == (1, 1)


def test_local_source_lists_env_folders_with_content_shas(tmp_path: Path, clean_factory) -> None:
    root = tmp_path / "envs"
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "not_an_env").mkdir()
    source = LocalSource(root)
    [item] = list(source.list())
    assert (item.owner, item.name, item.stage) == ("local", "echo_env", "LOCAL")
    assert item.sha == folder_sha(root / "echo_env") and len(item.sha) == 40
    assert "openenv" in item.tags and item.location == str(root / "echo_env")
    assert index_source(clean_factory, source).jobs == 1
    assert index_source(clean_factory, source).jobs == 0
    (root / "echo_env" / "models.py").write_text((root / "echo_env" / "models.py").read_text() + "\n# changed\n")
    assert index_source(clean_factory, source).changed == 1
    fetched = source.fetch("local", "echo_env", folder_sha(root / "echo_env"), tmp_path / "fetched")
    assert (fetched / "openenv.yaml").is_file() and not (fetched / "__pycache__").exists()
