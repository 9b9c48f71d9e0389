"""Pins and locks in the Hub's database (SQLite and PostgreSQL): digest pins resolve to their
revision (or a 404 that says which image was meant), explicit pins are noted, lock files register
and renew, and image collection keeps what a live lock or an unyanked pin needs and takes the rest."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid

import docker
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import pins
from hub_service.catalog.lock_models import ImageLock
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict, resolve
from hub_service.db import utcnow
from hub_service.errors import Conflict, InvalidRequest, NotFound
from hub_service.locks.service import register
from hub_service.pipeline.images_gc import _doomed, prune_env_images
from hub_service.settings import HubSettings
from openenv.client.lock import Lock, LockedEnv
from tests.hub.test_pipeline import _needs_docker

REGISTRY = "127.0.0.1:5999/hub"


def _digest(i: int) -> str:
    return "sha256:" + f"{i:x}" * 64


def _env(
    session: Session, name: str, versions: int, image: str = "gc-test/{name}:{i}"
) -> tuple[EnvRecord, list[EnvVersion]]:
    """`name` with `versions` passed main revisions built by docker (pushed, with digests); the last is current."""
    env = EnvRecord(source="hf", owner="alice", name=name, status="pending")
    session.add(env)
    session.flush()
    made = []
    for i in range(1, versions + 1):
        version = EnvVersion(
            env_id=env.id,
            sha=hashlib.sha1(f"{name}@{i}".encode()).hexdigest(),
            ref="main",
            state="passed",
            builder="container",
            image_ref=image.format(name=name, i=i),
            created_at=utcnow() - dt.timedelta(hours=versions - i),
        )
        version.registry_ref, version.image_digest = f"{REGISTRY}/alice/{name}:{version.sha}", _digest(i)
        session.add(version)
        session.flush()
        made.append(version)
    apply_verdict(env, made[-1])
    session.flush()
    return env, made


def _lock_document(*versions: tuple[str, EnvVersion]) -> dict:
    entries = [LockedEnv(f"alice/{name}", v.sha, v.image_digest, None) for name, v in versions]
    return Lock.of(entries, "http://hub").to_dict()


def test_a_digest_pin_resolves_to_its_revision_and_notes_the_pin(session: Session, hub_settings: HubSettings) -> None:
    _, (old, current) = _env(session, "echo_env", 2)
    _env(session, "other_env", 1, image="gc-test/other:{i}")
    other = session.scalar(select(EnvVersion).where(EnvVersion.image_ref == "gc-test/other:1"))
    other.image_digest = _digest(9)

    record = resolve(session, hub_settings, "alice", "echo_env", _digest(1).upper().replace("SHA256", "sha256"))
    assert record.revision == old.sha and record.image == f"{REGISTRY}/alice/echo_env@{_digest(1)}"
    assert record.image_digest == _digest(1) and old.pinned_at is not None
    assert resolve(session, hub_settings, "alice", "echo_env", None).revision == current.sha
    assert current.pinned_at is None  # the latest, unpinned: nothing to note
    resolve(session, hub_settings, "alice", "echo_env", current.sha[:12])
    assert current.pinned_at is None  # a prefix can name another commit tomorrow: not a pin
    resolve(session, hub_settings, "alice", "echo_env", current.sha)
    assert current.pinned_at is not None

    with pytest.raises(NotFound, match=rf"did you mean its current image, alice/echo_env@{_digest(2)}\?"):
        resolve(session, hub_settings, "alice", "echo_env", _digest(7))
    with pytest.raises(NotFound, match=rf"image of alice/other_env@.*did you mean alice/other_env@{_digest(9)}\?"):
        resolve(session, hub_settings, "alice", "echo_env", _digest(9))
    with pytest.raises(InvalidRequest, match="64 hex digits"):
        resolve(session, hub_settings, "alice", "echo_env", "sha256:abc")


def test_locks_register_renew_and_refuse_what_this_hub_does_not_have(
    session: Session, hub_settings: HubSettings
) -> None:
    _, (old, _current) = _env(session, "echo_env", 2)
    document = _lock_document(("echo_env", old))
    row, created = register(session, document, ttl_days=90)
    assert created and row.id == Lock.from_dict(document).id
    assert dt.timedelta(days=89) < row.expires_at - utcnow() <= dt.timedelta(days=90)
    again, created = register(session, document, ttl_days=90)
    assert not created and again is row and row.renewed_at is not None

    row.expires_at = utcnow() + dt.timedelta(days=1)  # a client resolving through it pushes expiry on
    record = resolve(session, hub_settings, "alice", "echo_env", old.sha, lock=row.id)
    assert record.lock_expires_at is not None and record.lock_expires_at - utcnow() > dt.timedelta(days=89)
    assert resolve(session, hub_settings, "alice", "echo_env", old.sha, lock="f" * 64).lock_expires_at is None
    with pytest.raises(InvalidRequest, match="64-hex id"):
        resolve(session, hub_settings, "alice", "echo_env", None, lock="nope")

    wrong_digest = _lock_document(("echo_env", old))
    wrong_digest["envs"]["alice/echo_env"]["image_digest"] = _digest(5)
    with pytest.raises(Conflict, match=r"this Hub's is sha256:1111.*re-run `openenv lock`"):
        register(session, wrong_digest, ttl_days=90)
    unknown = _lock_document(("echo_env", old))
    unknown["envs"]["alice/echo_envv"] = unknown["envs"].pop("alice/echo_env")
    with pytest.raises(NotFound, match="did you mean alice/echo_env"):
        register(session, unknown, ttl_days=90)
    with pytest.raises(InvalidRequest, match="not a valid lock file: 'envs'"):
        register(session, {**document, "envs": []}, ttl_days=90)


def test_collection_keeps_locked_and_pinned_images_and_takes_the_rest(session: Session) -> None:
    env, v = _env(session, "echo_env", 7)  # v[6] is current
    live, _ = register(session, _lock_document(("echo_env", v[0])), 90)
    expired, _ = register(session, {**_lock_document(("echo_env", v[1])), "created_at": "2026-01-01T00:00:00Z"}, 90)
    expired.expires_at = utcnow() - dt.timedelta(seconds=1)
    v[2].yanked = True  # locked while yanked: kept (the record flags it yanked)
    register(session, {**_lock_document(("echo_env", v[2])), "created_at": "2026-01-02T00:00:00Z"}, 90)
    pins.note_pin(v[3])  # pinned, unyanked: kept
    pins.note_pin(v[4])
    v[4].yanked = True  # pinned but yanked: taken
    session.flush()
    assert pins.live_locked_version_ids(session, env.id) == {v[0].id, v[2].id}
    doomed = {ref for _, ref in _doomed(session, env, keep=0)}
    assert doomed == {v[1].image_ref, v[4].image_ref, v[5].image_ref}
    session.delete(live)  # a lock gone: its revision is collected like any other
    session.flush()
    assert {ref for _, ref in _doomed(session, env, keep=0)} == {
        v[0].image_ref,
        v[1].image_ref,
        v[4].image_ref,
        v[5].image_ref,
    }
    assert session.scalar(select(ImageLock).where(ImageLock.id == expired.id)) is not None


@pytest.mark.docker
def test_pruning_removes_unlocked_images_from_the_engine(
    clean_factory: sessionmaker[Session], hub_settings: HubSettings
) -> None:
    """The same decision on a real engine: tags of the base image stand in for built images."""
    _needs_docker()
    client = docker.from_env()
    base = client.images.get(hub_settings.base_image)
    run = uuid.uuid4().hex[:8]
    refs = [f"openenv-test-locks-{run}/echo_env:{i}" for i in range(1, 4)]
    try:
        for ref in refs:
            repository, tag = ref.rsplit(":", 1)
            base.tag(repository, tag)
        with clean_factory.begin() as s:
            env, v = _env(s, "echo_env", 3, image=f"openenv-test-locks-{run}/{{name}}:{{i}}")
            register(s, _lock_document(("echo_env", v[0])), 90)
            env_id = env.id
        settings = hub_settings.model_copy(update={"keep_images_per_env": 0})
        assert prune_env_images(settings, clean_factory, env_id) == [refs[1]]
        present = [bool(client.images.list(name=ref)) for ref in refs]
        assert present == [True, False, True]  # locked, collected, current
        with clean_factory() as s:
            assert [x.image_ref for x in s.scalars(select(EnvVersion).order_by(EnvVersion.id))] == [
                refs[0],
                None,
                refs[2],
            ]
    finally:
        for ref in refs:
            if client.images.list(name=ref):
                client.images.remove(ref)
        client.close()


def test_a_user_holds_at_most_the_quota_of_live_locks_and_expired_ones_are_purged(session: Session) -> None:
    from sqlalchemy.orm import sessionmaker as _sessionmaker

    from hub_service.catalog.lock_models import ImageLockEntry
    from hub_service.locks.service import QuotaReached, purge_expired

    _, versions = _env(session, "quota_env", 3)
    documents = [_lock_document(("quota_env", v)) for v in versions]
    first, _ = register(session, documents[0], ttl_days=90, owner="mallory", max_per_owner=2)
    register(session, documents[1], ttl_days=90, owner="mallory", max_per_owner=2)
    assert first.owner == "mallory"
    with pytest.raises(QuotaReached, match="mallory holds 2 live locks, the most one user may") as caught:
        register(session, documents[2], ttl_days=90, owner="mallory", max_per_owner=2)
    assert caught.value.status == 403 and caught.value.code == "quota_reached"
    again, created = register(session, documents[0], ttl_days=90, owner="mallory", max_per_owner=2)
    assert not created and again is first  # renewing one is not a new one
    register(session, documents[2], ttl_days=90, owner="trent", max_per_owner=2)  # another user's quota

    first.expires_at = utcnow() - dt.timedelta(seconds=1)  # it ran out: it counts no more, and is purged
    session.flush()
    register(session, documents[2], ttl_days=90, owner="mallory", max_per_owner=2)  # renews trent's: not new
    factory = _sessionmaker(bind=session.connection(), join_transaction_mode="create_savepoint")
    gone = first.id
    assert purge_expired(factory) == 1
    session.expire_all()
    assert session.get(ImageLock, gone) is None
    assert session.scalars(select(ImageLockEntry).where(ImageLockEntry.lock_id == gone)).all() == []
    assert purge_expired(factory) == 0
