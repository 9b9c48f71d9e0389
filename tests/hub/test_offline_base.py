"""The base image builds get when no registry answers is faithful to python:3.11-slim (issue 29):
the same layout (python, python3 and pip in /usr/local/bin, packages in /usr/local/lib/python3.11/
site-packages, Python's headers where sysconfig says, no compiler), so that an env with a C
extension that builds on the real image builds here too, through the whole pipeline; and each
build's log says which base served it. On a machine whose base is the real python:3.11-slim the
same checks hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select

from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.support.dockerd import engine_past_its_start_up

pytestmark = [pytest.mark.docker, pytest.mark.slow]

_LAYOUT = """
import os, shutil, sys, sysconfig
paths = sysconfig.get_paths()
print(sys.executable, shutil.which("pip"), paths["purelib"], paths["include"], sep="\\n")
print(os.path.isfile(os.path.join(paths["include"], "Python.h")), shutil.which("gcc"), sep="\\n")
"""


def test_the_base_image_is_laid_out_as_python_3_11_slim_is() -> None:
    _needs_docker()
    import docker

    out = docker.from_env().containers.run(
        os.environ["OPENENV_TEST_BASE_IMAGE"], ["python", "-c", _LAYOUT], remove=True
    )
    executable, pip, purelib, include, has_header, gcc = out.decode().split("\n")[:6]
    assert (executable, pip, purelib) == (
        "/usr/local/bin/python",
        "/usr/local/bin/pip",
        "/usr/local/lib/python3.11/site-packages",
    )
    assert has_header == "True", include  # C extensions find Python.h...
    assert gcc == "None"  # ...and bring their own compiler, as on the real image


def test_a_c_extension_that_builds_on_the_real_image_builds_and_runs_here(
    clean_factory, hub_settings: HubSettings
) -> None:
    _needs_docker()
    engine_past_its_start_up()  # a verdict about the env's own build, on an engine up a while
    settings = hub_settings.model_copy(update={"builder": "container"})
    root = make_envs(Path(settings.local_source), "c_extension")
    index_source(clean_factory, LocalSource(root, trusted=False))  # as a Space is: its code runs only in its container
    assert Worker(settings, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]
    version = verdicts(clean_factory)["c_extension"]
    assert (version.state, version.build_status, version.smoke_status) == ("passed", "passed", "passed")
    with clean_factory() as s:
        build_log = s.scalar(select(StageRun.log).where(StageRun.stage == "build"))
    base = os.environ["OPENENV_TEST_BASE_IMAGE"]
    assert f"base image {base} (sha256:" in build_log and "serves this build" in build_log, build_log[:2000]
