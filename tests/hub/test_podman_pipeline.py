"""The whole pipeline on Podman (issue 31): every bundled env validated, built (by buildah behind
Podman's API service), smoke-tested in a confined container and published to the registry by
digest, with `OPENENV_CONTAINER_ENGINE=podman` and nothing else changed. A file of its own so that
it runs beside the Docker one (tests/hub/test_registry_publish.py), not after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hub.test_registry_publish import publish_every_bundled_env
from tests.support.systems import use_podman

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.timeout(900)  # seven builds and smoke tests: a few minutes, more on a busy machine
def test_the_pipeline_publishes_every_bundled_env_on_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_podman(monkeypatch)
    publish_every_bundled_env(tmp_path)
