"""A revision moves only through hub_service.lifecycle: illegal moves are refused, each
finishing move is in the audit trail and reaches the listeners, and the database itself refuses
a state outside the vocabulary (the CHECK constraints made from the enums, tests/hub/test_vocabularies.py),
on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hub_service import lifecycle
from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope
from hub_service.lifecycle import IllegalTransition, Transition

SHA = "c" * 40


@pytest.fixture()
def version_ids(clean_factory: sessionmaker[Session]) -> tuple[int, int]:
    with session_scope(clean_factory) as session:
        env = EnvRecord(source="local", owner="alice", name="echo_env", sha=SHA, status="pending", tags=[])
        session.add(env)
        session.flush()
        version = EnvVersion(env_id=env.id, sha=SHA, ref="main", state=VersionState.QUEUED)
        session.add(version)
        session.flush()
        return env.id, version.id


@pytest.fixture()
def heard() -> Iterator[list[tuple[str, Transition]]]:
    calls: list[tuple[str, Transition]] = []
    lifecycle.listen(
        "test_listener",
        on=lifecycle.FINISHED,
        in_transaction=lambda s, e, v, t: calls.append(("in_transaction", t)),
        after_commit=lambda s, t: calls.append(("after_commit", t)),
    )
    yield calls
    lifecycle.forget("test_listener")


def _move(factory: sessionmaker[Session], version_id: int, to: VersionState, **kw: object) -> None:
    with session_scope(factory) as session:
        version = session.get_one(EnvVersion, version_id)
        lifecycle.move(session, session.get_one(EnvRecord, version.env_id), version, to, cause="test", **kw)  # type: ignore[arg-type]


def test_a_run_that_fails_is_the_envs_verdict_in_the_trail_and_heard_once_committed(
    clean_factory: sessionmaker[Session], version_ids: tuple[int, int], heard: list[tuple[str, Transition]]
) -> None:
    env_id, version_id = version_ids
    _move(clean_factory, version_id, VersionState.RUNNING)
    assert heard == []  # nobody listens to claims
    _move(clean_factory, version_id, VersionState.FAILED, failure_stage="build", failure_reason="no Dockerfile")
    assert [(when, t.before, t.after) for when, t in heard] == [
        ("in_transaction", "running", "failed"),
        ("after_commit", "running", "failed"),
    ]
    with clean_factory() as session:
        env = session.get_one(EnvRecord, env_id)
        version = session.get_one(EnvVersion, version_id)
        events = session.scalars(select(EnvEvent).where(EnvEvent.env_id == env_id)).all()
    assert (version.state, version.failure_stage, version.finished_at is not None) == ("failed", "build", True)
    assert env.status == "failing" and env.latest_version_id == version_id
    assert [(e.kind, e.summary) for e in events] == [("failed", f"{SHA[:12]} (main) failed at build: no Dockerfile")]


def test_an_illegal_move_is_refused_and_changes_nothing(
    clean_factory: sessionmaker[Session], version_ids: tuple[int, int], heard: list[tuple[str, Transition]]
) -> None:
    _, version_id = version_ids
    _move(clean_factory, version_id, VersionState.RUNNING)
    _move(clean_factory, version_id, VersionState.PASSED)
    heard.clear()
    with pytest.raises(IllegalTransition, match="cannot go from passed to running; the lifecycle allows queued"):
        _move(clean_factory, version_id, VersionState.RUNNING)
    with clean_factory() as session:
        assert session.get_one(EnvVersion, version_id).state == "passed"
    assert heard == []


def test_a_rolled_back_move_is_never_heard_after_commit(
    clean_factory: sessionmaker[Session], version_ids: tuple[int, int], heard: list[tuple[str, Transition]]
) -> None:
    _, version_id = version_ids
    with clean_factory() as session:
        version = session.get_one(EnvVersion, version_id)
        lifecycle.move(session, session.get_one(EnvRecord, version.env_id), version, VersionState.CANCELLED, cause="t")
        session.rollback()
        session.commit()  # a later commit of the same session must not replay the rolled-back move
    assert [when for when, _ in heard] == ["in_transaction"]


def test_the_database_refuses_a_state_outside_the_vocabulary(
    clean_factory: sessionmaker[Session], version_ids: tuple[int, int]
) -> None:
    _, version_id = version_ids
    for table, column, row in (
        ("env_versions", "state", version_id),
        ("env_versions", "builder", version_id),
        ("environments", "status", version_ids[0]),
    ):
        with pytest.raises(IntegrityError), session_scope(clean_factory) as session:
            session.execute(text(f"UPDATE {table} SET {column} = 'bogus' WHERE id = :id"), {"id": row})
    with clean_factory() as session:
        assert session.get_one(EnvVersion, version_id).state == "queued"
