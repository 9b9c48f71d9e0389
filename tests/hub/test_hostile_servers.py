"""Hostile env servers, through the real pipeline (Docker, the worker, the database): a `/schema`
that drips a byte at a time is stopped at the smoke stage's deadline with its container removed and
the worker moves on; a 300 MB `/schema` and a 400 MB reply in continuation frames fail the smoke
test at the Hub's caps, naming the setting; a 48 MB log line does not push the Hub's lines out."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.pipeline import stages
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import verdicts
from tests.support.servers import ROOT
from tests.support.systems import require_system

_DOCKERFILE = """ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
WORKDIR /app/env
COPY . /app/env
ENV PORT=8000 HOST=0.0.0.0 PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["python", "hostile_env_server.py"]
"""


def _hostile_env(root: Path, name: str, mode: str) -> None:
    """The echo env's files (so validation passes), served by tests/support/hostile_env_server.py in `mode`."""
    folder = root / name
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "support" / "hostile_env_server.py", folder / "hostile_env_server.py")
    (folder / "mode.txt").write_text(mode)
    (folder / "Dockerfile").write_text(_DOCKERFILE)
    manifest = folder / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("name: echo_env", f"name: {name}"))


@pytest.mark.docker
@pytest.mark.slow
def test_hostile_replies_fail_at_the_caps_and_a_dripping_server_at_the_deadline(
    clean_factory, hub_settings: HubSettings
) -> None:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    import docker

    deadline = 8.0
    settings = hub_settings.model_copy(
        update={
            # RFC 008's gate off: these servers' Dockerfiles carry no OCI labels (static.oci_labels);
            # the smoke stage's caps are what this test is about
            "rfc008_gate": "off",
            "builder": "container",
            "smoke_deadline_s": deadline,
            "step_timeout_s": 30.0,  # per-read limits longer than the deadline
            "smoke_reply_max_mb": 1.0,
            "smoke_message_max_mb": 1.0,
        }
    )
    root = Path(settings.local_source)
    for name, mode in (("a_drip", "drip"), ("b_huge_schema", "huge_schema"), ("c_fragmented", "fragmented")):
        _hostile_env(root, name, mode)
    assert index_source(clean_factory, LocalSource(root)).jobs == 3
    engine = docker.from_env()
    try:
        outcomes = Worker(settings, clean_factory).run_until_idle()
        assert outcomes == ["failed"] * 3  # the dripping env came first; the worker went on to the others
        v = verdicts(clean_factory)

        drip = v["a_drip"]
        assert drip.failure_stage == "smoke", drip.failure_reason
        assert f"did not finish within {deadline:g}s (OPENENV_HUB_SMOKE_DEADLINE_S)" in drip.failure_reason
        with clean_factory() as s:
            run = s.scalar(select(StageRun).where(StageRun.version_id == drip.id, StageRun.stage == "smoke"))
        assert run.status == "failed" and run.seconds < deadline + 20, run.seconds
        assert "ran past its deadline" in run.log

        huge = v["b_huge_schema"]
        assert huge.failure_stage == "smoke"
        assert (
            "GET /schema returned more than 1 MB" in huge.failure_reason
            and "OPENENV_HUB_SMOKE_REPLY_MAX_MB" in huge.failure_reason
        )

        fragmented = v["c_fragmented"]
        assert fragmented.failure_stage == "smoke"
        assert "limit of 1 MB (max_message_size_mb)" in fragmented.failure_reason, fragmented.failure_reason
        assert "OPENENV_HUB_SMOKE_MESSAGE_MAX_MB" in fragmented.failure_reason

        for version in (drip, huge, fragmented):  # every smoke container was stopped and removed
            assert version.image_ref
            assert engine.containers.list(all=True, filters={"ancestor": version.image_ref}) == []
    finally:
        for version in verdicts(clean_factory).values():
            if version.image_ref:
                for container in engine.containers.list(all=True, filters={"ancestor": version.image_ref}):
                    container.remove(force=True)
                with contextlib.suppress(docker.errors.NotFound):
                    engine.images.remove(version.image_ref, force=True)


def test_a_huge_log_line_is_cut_and_the_hubs_own_lines_stay() -> None:
    log = stages.StageLog()
    log("building image openenv-hub/local-x:0123456789ab from Dockerfile")
    started = time.monotonic()
    log("y" * (48 << 20))
    for i in range(2000):
        log(f"server| {'z' * 900} {i}")
    log("FAILED: the env's reason")
    assert time.monotonic() - started < 5
    text = log.text()
    assert "building image openenv-hub/local-x:0123456789ab" in text and text.endswith("FAILED: the env's reason")
    assert "more characters cut]" in text and "lines dropped" in text
    assert len(text) < 450_000
