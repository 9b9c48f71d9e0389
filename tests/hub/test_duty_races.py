"""Issue 47, item 7: duties that never lose a race, on SQLite and PostgreSQL.

A lock file registered after image collection planned keeps its image (in the registry and on the
engine); one registered while the registry deletes it waits and is told the image is gone; two
registrations at once never pass a user's quota together; and a duty whose leader lost the lease
in the middle of its run writes nothing more, in the database or in the registry.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import logging
import tarfile
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from hub_service import registry_api, serve
from hub_service.catalog.lock_models import ImageLock
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import utcnow
from hub_service.errors import Conflict
from hub_service.leadership import Leadership
from hub_service.locks.service import QuotaReached, register
from hub_service.pipeline import images_gc, registry_gc
from hub_service.pipeline.gc_models import RegistryDeletion
from hub_service.settings import HubSettings
from openenv.client.lock import Lock, LockedEnv
from tests.support.registry import Registry, manifest_digest, test_registry

_WAIT_S = 1.0  # how long a hook gives a racing transaction to get in (it must not, with the fixes)


def _lock_document(name: str, version: EnvVersion, *, digest: bool = True) -> dict[str, Any]:
    entry = LockedEnv(f"alice/{name}", version.sha, version.image_digest if digest else None, None)
    return Lock.of([entry], f"http://hub/{uuid.uuid4().hex}").to_dict()


def _register(factory: sessionmaker[Session], document: dict[str, Any], **quota: Any) -> str:
    """Register `document` in a transaction of its own; what happened, in a word."""
    with factory() as session:
        try:
            register(session, document, ttl_days=90, **quota)
            session.commit()
            return "registered"
        except QuotaReached:
            return "refused"
        except Conflict:
            return "conflict"


def _env(
    factory: sessionmaker[Session], name: str, refs: list[tuple[str | None, str | None, str | None]]
) -> list[EnvVersion]:
    """`alice/<name>` with a passed main revision per (image_ref, registry_ref, image_digest), oldest
    first; the last is current."""
    with factory.begin() as s:
        env = EnvRecord(source="hf", owner="alice", name=name, status="pending")
        s.add(env)
        s.flush()
        versions = []
        for i, (image_ref, registry_ref, digest) in enumerate(refs):
            version = EnvVersion(
                env_id=env.id,
                sha=hashlib.sha1(f"{name}@{i}".encode()).hexdigest(),
                ref="main",
                state="passed",
                builder="container",
                created_at=utcnow() - dt.timedelta(hours=10 - i),
                image_ref=image_ref,
                registry_ref=registry_ref,
                image_digest=digest,
            )
            s.add(version)
            versions.append(version)
        s.flush()
        apply_verdict(env, versions[-1])
    return versions


@pytest.fixture()
def pushed(
    clean_factory: sessionmaker[Session], hub_settings: HubSettings
) -> tuple[Registry, HubSettings, str, list[EnvVersion]]:
    """Two tiny images pushed through the registry's API (no engine) as two revisions of
    `alice/race_env`; the newer is current, so collection (keeping no others) plans the older one."""
    registry = test_registry()
    namespace = f"race{uuid.uuid4().hex[:10]}"
    settings = hub_settings.model_copy(
        update={
            "registry": f"{registry.host}/{namespace}",
            "registry_user": registry.user,
            "registry_password": SecretStr(registry.password),
            "registry_gc": "delete",
            "keep_images_per_env": 0,
        }
    )
    repository = f"{namespace}/alice/race_env"
    refs: list[tuple[str | None, str | None, str | None]] = []
    with registry_api.client(settings) as c:
        for i in range(2):
            layer = registry_api.push_blob(c, registry.host, repository, f"{namespace} {i}".encode())
            config = json.dumps(
                {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [layer]}}
            ).encode()
            manifest = json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {
                        "mediaType": "application/vnd.oci.image.config.v1+json",
                        "size": len(config),
                        "digest": registry_api.push_blob(c, registry.host, repository, config),
                    },
                    "layers": [
                        {
                            "mediaType": "application/vnd.oci.image.layer.v1.tar",
                            "size": len(f"{namespace} {i}"),
                            "digest": layer,
                        }
                    ],
                }
            ).encode()
            tag = hashlib.sha1(f"race_env@{i}".encode()).hexdigest()
            digest = registry_api.put_manifest(
                c, registry.host, repository, tag, manifest, "application/vnd.oci.image.manifest.v1+json"
            )
            refs.append((None, f"{registry.host}/{repository}:{tag}", digest))
    return registry, settings, repository, _env(clean_factory, "race_env", refs)


def _on_statement(engine: Engine, matches: Callable[[str], bool], hook: Callable[[], None]) -> Callable[[], None]:
    """Call `hook` before each statement of `engine` that `matches`; returns what removes it."""

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if matches(statement):
            hook()

    event.listen(engine, "before_cursor_execute", before)
    return lambda: event.remove(engine, "before_cursor_execute", before)


def test_two_registrations_at_once_pass_a_quota_of_one_once(
    clean_factory: sessionmaker[Session], engine: Engine
) -> None:
    """Both registrations are held just before they count the user's locks, until both are there
    or a second has passed (with the fix, the second waits for the first to commit instead)."""
    versions = _env(clean_factory, "quota_env", [(None, None, None), (None, None, None)])
    documents = [_lock_document("quota_env", v, digest=False) for v in versions]
    barrier = threading.Barrier(2)

    def meet() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(_WAIT_S)

    results: list[str] = []

    def one(document: dict[str, Any]) -> None:
        try:
            results.append(_register(clean_factory, document, owner="mallory", max_per_owner=1))
        except Exception as exc:  # what a user would get: a 500
            results.append(repr(exc)[:200])

    remove = _on_statement(engine, lambda sql: "count(" in sql.lower() and "FROM image_locks" in sql, meet)
    try:
        threads = [threading.Thread(target=one, args=(d,)) for d in documents]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        remove()
    assert sorted(results) == ["refused", "registered"]
    with clean_factory() as s:
        assert s.scalar(select(func.count()).select_from(ImageLock).where(ImageLock.owner == "mallory")) == 1


def test_a_lock_registered_after_the_plan_keeps_its_registry_image(
    pushed: tuple[Registry, HubSettings, str, list[EnvVersion]],
    clean_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, settings, repository, (old, _current) = pushed
    real_plan = registry_gc.plan

    def plan_then_lock(session: Session, settings: HubSettings) -> list[registry_gc.Doomed]:
        doomed = real_plan(session, settings)
        assert [d.digest for d in doomed] == [old.image_digest]
        assert _register(clean_factory, _lock_document("race_env", old)) == "registered"
        return doomed

    monkeypatch.setattr(registry_gc, "plan", plan_then_lock)
    assert registry_gc.collect_registry(settings, clean_factory, dry_run=False) == []
    assert manifest_digest(registry, repository, old.image_digest or "") == (200, old.image_digest)
    with clean_factory() as s:
        assert s.scalar(select(EnvVersion.registry_ref).where(EnvVersion.id == old.id)) == old.registry_ref
        assert s.scalar(select(func.count()).select_from(RegistryDeletion)) == 0


def test_a_lock_registered_during_the_deletion_waits_and_hears_the_image_is_gone(
    pushed: tuple[Registry, HubSettings, str, list[EnvVersion]],
    clean_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The registration starts while the registry deletes the image; it must not commit a lock on
    an image being deleted (with the fix it waits, then finds the image gone: 409)."""
    registry, settings, repository, (old, _current) = pushed
    real_delete = registry_gc._delete
    outcome: list[str] = []
    racer = threading.Thread(
        target=lambda: outcome.append(_register(clean_factory, _lock_document("race_env", old))), daemon=True
    )

    def delete_while_registering(*args: Any) -> tuple[str, str]:
        racer.start()
        racer.join(_WAIT_S)
        return real_delete(*args)

    monkeypatch.setattr(registry_gc, "_delete", delete_while_registering)
    done = registry_gc.collect_registry(settings, clean_factory, dry_run=False)
    racer.join(30)
    assert [r.outcome for r in done] == ["deleted"]
    assert manifest_digest(registry, repository, old.image_digest or "")[0] == 404
    assert outcome == ["conflict"], "a lock was registered on an image the collection deleted"
    with clean_factory() as s:
        assert s.scalar(select(func.count()).select_from(ImageLock)) == 0


def _tiny_image(client: Any, tag: str, content: str) -> None:
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY f /f\n"), ("f", content.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)


@pytest.mark.docker
def test_a_lock_registered_after_the_plan_keeps_its_engine_image(
    clean_factory: sessionmaker[Session], hub_settings: HubSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.hub.test_pipeline import _needs_docker

    _needs_docker()
    import docker

    client = docker.from_env()
    nonce = uuid.uuid4().hex[:10]
    tags = [f"openenv-duty-race-{nonce}:{i}" for i in range(2)]  # not under the prefix other test runs sweep
    try:
        for i, tag in enumerate(tags):
            _tiny_image(client, tag, f"{nonce} {i}")
        old, _current = _env(clean_factory, "engine_env", [(tag, None, None) for tag in tags])
        real_doomed = images_gc._doomed
        planned: list[list[tuple[int, str]]] = []

        def doomed_then_lock(session: Session, env: EnvRecord, keep: int) -> list[tuple[int, str]]:
            doomed = real_doomed(session, env, keep)
            if not planned:  # the plan; later calls re-check it
                planned.append(doomed)
                assert _register(clean_factory, _lock_document("engine_env", old, digest=False)) == "registered"
            return doomed

        monkeypatch.setattr(images_gc, "_doomed", doomed_then_lock)
        settings = hub_settings.model_copy(update={"keep_images_per_env": 0})
        assert images_gc.prune_env_images(settings, clean_factory, old.env_id) == []
        assert planned == [[(old.id, tags[0])]]
        client.images.get(tags[0])  # still there
        with clean_factory() as s:
            assert s.scalar(select(EnvVersion.image_ref).where(EnvVersion.id == old.id)) == tags[0]
    finally:
        for tag in tags:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag, force=True)
        client.close()


@pytest.fixture()
def leaders(engine: Engine, clean_factory: sessionmaker[Session]) -> Iterator[tuple[Leadership, Callable[[], None]]]:
    """(the leader, what makes another process take its lease over now, as if its lease ran out)."""
    first, second = Leadership(engine, lease_s=60), Leadership(engine, lease_s=60)
    assert first.renew() and not second.renew()

    def take_over() -> None:
        with engine.begin() as conn:
            conn.execute(text("UPDATE service_leases SET expires_at = expires_at - 120"))
        assert second.renew() and second.term == first.term + 1

    yield first, take_over


def _runs(factory: sessionmaker[Session]) -> list[tuple[str, str | None]]:
    with factory() as s:
        return [(r.duty, r.outcome) for r in s.execute(text("SELECT duty, outcome FROM duty_runs ORDER BY id"))]


def test_a_duty_whose_leader_was_deposed_mid_run_commits_nothing(
    leaders: tuple[Leadership, Callable[[], None]],
    clean_factory: sessionmaker[Session],
    hub_settings: HubSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The collection duty's first write (purging an expired lock) comes after the takeover."""
    leader, take_over = leaders
    with clean_factory.begin() as s:
        s.add(
            ImageLock(
                id="e" * 64, document={}, created_at=utcnow(), expires_at=utcnow() - dt.timedelta(days=1), owner="x"
            )
        )

    def duty(fence: Any) -> None:
        take_over()
        serve.collect(hub_settings, fence)

    with caplog.at_level(logging.WARNING, logger="hub_service.leadership"):
        assert leader.record("collect", duty)
    with clean_factory() as s:
        assert s.get(ImageLock, "e" * 64) is not None, "a deposed leader purged a lock"
    assert _runs(clean_factory) == [("collect", "deposed")]
    assert "the collect duty stops" in caplog.text and f"in term {leader.term}" in caplog.text


def test_a_deposed_leaders_registry_collection_deletes_nothing(
    pushed: tuple[Registry, HubSettings, str, list[EnvVersion]],
    leaders: tuple[Leadership, Callable[[], None]],
    clean_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lease is taken over between the plan and the deletion: the registry is not touched."""
    registry, settings, repository, (old, _current) = pushed
    leader, take_over = leaders
    real_plan = registry_gc.plan

    def plan_then_lose_the_lease(session: Session, settings: HubSettings) -> list[registry_gc.Doomed]:
        doomed = real_plan(session, settings)
        take_over()
        return doomed

    monkeypatch.setattr(registry_gc, "plan", plan_then_lose_the_lease)
    assert leader.record("collect", lambda fence: serve.collect(settings, fence))
    assert manifest_digest(registry, repository, old.image_digest or "") == (200, old.image_digest)
    with clean_factory() as s:
        assert s.scalar(select(EnvVersion.registry_ref).where(EnvVersion.id == old.id)) == old.registry_ref
        assert s.scalar(select(func.count()).select_from(RegistryDeletion)) == 0
    assert _runs(clean_factory) == [("collect", "deposed")]
