"""The Hub's disk: images of revisions nobody needs are removed after each job of their env; the
current revision's, the newest older passing one (for pinned clients) and any image a container
still runs stay."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest
from docker.errors import ImageNotFound
from sqlalchemy import select

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.pipeline.images_gc import prune_env_images
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except ImageNotFound:
        return False


def _image_refs(factory) -> dict[str, str | None]:
    with factory() as s:
        return {v.sha: v.image_ref for v in s.scalars(select(EnvVersion))}


def test_superseded_images_go_and_needed_ones_stay(clean_factory, hub_settings: HubSettings) -> None:
    _needs_docker()
    settings = hub_settings.model_copy(update={"builder": "container", "keep_images_per_env": 1})
    root = make_envs(Path(settings.local_source), "echo_env")
    readme = root / "echo_env" / "README.md"
    # Images of the same content have the same id: a container left by an earlier run (one killed
    # outright) would hold this run's image too. A nonce makes every revision's image this run's own.
    nonce = uuid.uuid4().hex
    client = docker.from_env()
    images: list[str] = []
    shas: list[str] = []
    container = None
    try:
        for i in range(4):
            readme.write_text(readme.read_text() + f"\nRevision {i} of this copy ({nonce}).\n")
            index_source(clean_factory, LocalSource(root))
            assert Worker(settings, clean_factory).run_until_idle() == ["passed"]
            with clean_factory() as s:
                env = s.scalar(select(EnvRecord))
                current = s.get(EnvVersion, env.latest_version_id)
                images.append(current.image_ref)
                shas.append(current.sha)
            if i == 2:
                # the current and the newest older passing image stay; the oldest is gone, and its
                # version no longer offers it
                assert [_exists(client, ref) for ref in images] == [False, True, True]
                assert _image_refs(clean_factory)[shas[0]] is None
                # a play session runs the image of revision 1, which the next job would remove
                container = client.containers.run(
                    images[1], detach=True, command=["sleep", "300"], labels={"org.openenv.test": "gc"}
                )
        # revision 3 is current, revision 2 the kept fallback; revision 1's image is in use: it stays
        assert [_exists(client, ref) for ref in images] == [False, True, True, True]
        assert _image_refs(clean_factory)[shas[1]] == images[1]
        container.remove(force=True)
        container = None
        with clean_factory() as s:
            env_id = s.scalar(select(EnvRecord.id))
        assert prune_env_images(settings, clean_factory, env_id) == [images[1]]  # the next pass takes it
        assert [_exists(client, ref) for ref in images] == [False, False, True, True]
        assert prune_env_images(settings, clean_factory, env_id) == []
    finally:
        if container is not None:
            container.remove(force=True)
        for ref in images:
            if _exists(client, ref):
                client.images.remove(ref, force=True)
        client.close()
