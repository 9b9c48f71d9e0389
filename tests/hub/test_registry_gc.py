"""Issue 37: registry collection against the real registry (scripts/registry). Five revisions of an
env pushed by digest; the current one, a pinned one and the newest other passing one are kept, the
other two are not. A dry run deletes nothing and records its plan; the real run deletes the two
manifests (they answer 404), records each deletion, and the kept images still pull by digest."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import utcnow
from hub_service.pipeline.gc_models import RegistryDeletion
from hub_service.pipeline.registry_gc import collect_registry
from hub_service.settings import HubSettings
from tests.hub.test_pipeline import _needs_docker
from tests.support.registry import Registry, manifest_digest, private_registry, test_registry
from tests.support.servers import ROOT

pytestmark = pytest.mark.slow


def _tiny_image(client: object, tag: str, content: str) -> None:
    """An image of one small file (FROM scratch): a distinct digest per `content`, built in a moment."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY f /f\n"), ("f", content.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)  # type: ignore[attr-defined]


@pytest.fixture()
def pushed(clean_factory: sessionmaker[Session]) -> Iterator[tuple[Registry, str, list[str]]]:
    """Five images pushed to `<registry>/<namespace>/alice/gc_env:<sha>`; yields (registry, namespace, digests)."""
    _needs_docker()
    import docker

    registry = test_registry()
    namespace = f"gc{uuid.uuid4().hex[:10]}"
    repository = f"{registry.host}/{namespace}/alice/gc_env"
    client = docker.from_env()
    tags = []
    digests = []
    try:
        for i in range(5):
            tag = f"{repository}:{i:040x}"
            _tiny_image(client, tag, f"revision {i} of {namespace}")
            tags.append(tag)
            client.images.push(repository, tag=f"{i:040x}", auth_config=registry.auth)
            status, digest = manifest_digest(registry, f"{namespace}/alice/gc_env", f"{i:040x}")
            assert status == 200 and digest, f"the push of {tag} did not land ({status})"
            digests.append(digest)
        yield registry, namespace, digests
    finally:
        for tag in tags:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag, force=True)
        client.close()


def test_collection_deletes_what_nothing_keeps_after_a_dry_run(
    pushed: tuple[Registry, str, list[str]], clean_factory: sessionmaker[Session], hub_settings: HubSettings
) -> None:
    registry, namespace, digests = pushed
    settings = hub_settings.model_copy(
        update={
            "registry": f"{registry.host}/{namespace}",
            "registry_user": registry.user,
            "registry_password": SecretStr(registry.password),
            "keep_images_per_env": 1,
        }
    )
    with clean_factory.begin() as s:
        env = EnvRecord(source="hf", owner="alice", name="gc_env", status="pending")
        s.add(env)
        s.flush()
        versions = []
        for i, digest in enumerate(digests):
            version = EnvVersion(
                env_id=env.id,
                sha=f"{i:040x}",
                ref="main",
                state="passed",
                builder="container",
                created_at=utcnow() - dt.timedelta(hours=10 - i),
                registry_ref=f"{registry.host}/{namespace}/alice/gc_env:{i:040x}",
                image_digest=digest,
            )
            s.add(version)
            versions.append(version)
        s.flush()
        versions[0].pinned_at = utcnow()  # a client resolved it by its digest: kept
        apply_verdict(env, versions[4])  # current: kept; versions[3]: the one newest other kept
    kept, dropped = [digests[0], digests[3], digests[4]], [digests[1], digests[2]]
    repo = f"{namespace}/alice/gc_env"

    planned = collect_registry(settings, clean_factory, dry_run=True)
    assert sorted(r.digest for r in planned) == sorted(dropped)
    assert all(r.outcome == "planned" and r.dry_run for r in planned)
    assert all(manifest_digest(registry, repo, d)[0] == 200 for d in digests), "a dry run deleted something"

    done = collect_registry(settings, clean_factory, dry_run=False)
    assert sorted(r.digest for r in done) == sorted(dropped) and all(r.outcome == "deleted" for r in done)
    for digest in dropped:
        assert manifest_digest(registry, repo, digest)[0] == 404
    for digest in kept:
        assert manifest_digest(registry, repo, digest) == (200, digest)
    with clean_factory() as s:
        refs = {v.image_digest: v.registry_ref for v in s.scalars(select(EnvVersion))}
        audit = s.scalars(select(RegistryDeletion).order_by(RegistryDeletion.id)).all()
    assert all(refs[d] is None for d in dropped) and all(refs[d] is not None for d in kept)
    assert [(r.dry_run, r.outcome) for r in audit] == [(True, "planned")] * 2 + [(False, "deleted")] * 2

    import docker

    client = docker.from_env()
    try:  # a kept image still pulls by digest, through the real engine
        pulled = client.images.pull(f"{registry.host}/{repo}@{digests[0]}", auth_config=registry.auth)
        assert digests[0] in " ".join(pulled.attrs.get("RepoDigests", []))
        client.images.remove(f"{registry.host}/{repo}@{digests[0]}", force=True)
    finally:
        client.close()
    assert collect_registry(settings, clean_factory, dry_run=False) == []  # nothing left to collect


def _blobs(storage: Path) -> set[str]:
    return {f"sha256:{p.parent.name}" for p in (storage / "docker/registry/v2/blobs/sha256").glob("*/*/data")}


def _needed(registry: Registry, repo: str, digest: str) -> set[str]:
    """The blobs the manifest `digest` needs: itself, its config and its layers."""
    import httpx

    manifest = httpx.get(
        f"http://{registry.host}/v2/{repo}/manifests/{digest}",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        auth=(registry.user, registry.password),
        timeout=10,
    ).json()
    return {digest, manifest["config"]["digest"], *(layer["digest"] for layer in manifest["layers"])}


def test_the_registry_storage_returns_to_the_kept_set_after_its_blob_collection(
    tmp_path: Path, clean_factory: sessionmaker[Session], hub_settings: HubSettings
) -> None:
    """A registry of the test's own: after collection and `scripts/registry gc`, its storage holds
    exactly the blobs of the kept images."""
    _needs_docker()
    import docker

    client = docker.from_env()
    with private_registry(tmp_path / "registry") as (_, start, _stop):
        registry = start()
        repo = "alice/gc_env"
        tags, digests = [], []
        try:
            for i in range(3):
                tag = f"{registry.host}/{repo}:{i:040x}"
                _tiny_image(client, tag, f"blob {i} {uuid.uuid4().hex}")
                tags.append(tag)
                client.images.push(f"{registry.host}/{repo}", tag=f"{i:040x}", auth_config=registry.auth)
                digests.append(manifest_digest(registry, repo, f"{i:040x}")[1])
        finally:
            for tag in tags:
                client.images.remove(tag, force=True)
            client.close()
        with clean_factory.begin() as s:
            env = EnvRecord(source="hf", owner="alice", name="gc_env", status="pending")
            s.add(env)
            s.flush()
            versions = [
                EnvVersion(
                    env_id=env.id,
                    sha=f"{i:040x}",
                    ref="main",
                    state="passed",
                    builder="container",
                    created_at=utcnow() - dt.timedelta(hours=10 - i),
                    registry_ref=f"{registry.host}/{repo}:{i:040x}",
                    image_digest=digest,
                )
                for i, digest in enumerate(digests)
            ]
            s.add_all(versions)
            s.flush()
            apply_verdict(env, versions[-1])
        settings = hub_settings.model_copy(
            update={
                "registry": registry.host,
                "registry_user": registry.user,
                "registry_password": SecretStr(registry.password),
                "keep_images_per_env": 0,
            }
        )
        storage = tmp_path / "registry" / "storage"
        before = _blobs(storage)
        kept = _needed(registry, repo, digests[-1])
        done = collect_registry(settings, clean_factory, dry_run=False)
        assert sorted(r.digest for r in done) == sorted(digests[:2])
        assert _blobs(storage) == before, "deleting manifests frees nothing by itself"
        env_vars = {**os.environ, "OPENENV_REGISTRY_DIR": str(tmp_path / "registry")}
        out = subprocess.run(["bash", "scripts/registry", "gc"], cwd=ROOT, env=env_vars, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert _blobs(storage) == kept
        assert manifest_digest(registry, repo, digests[-1]) == (200, digests[-1])  # started again, still serving
