"""Every bundled env smoke-tested under gVisor (issue 31), with `OPENENV_HUB_SANDBOX_RUNTIME=runsc`:
each smoke log says the container ran on gVisor's kernel, as seen on the host. Six of the seven
pass. coding_env refuses to start, by its own sandbox's rule: as the unprivileged uid a Space runs
as, it keeps the code it runs away from its server's files with Landlock, which gVisor's kernel
does not offer, and it says so. A file of its own so that it runs beside the runc pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.hub.test_registry_publish import bundled_envs
from tests.hub.test_rfc008_container import assert_container_checks_pass
from tests.support.systems import require_runsc

pytestmark = [pytest.mark.docker, pytest.mark.slow]
GVISOR_LINE = "container runtime: runsc (gVisor's kernel; its first process on this host"
NO_LANDLOCK = "this kernel has no Landlock and the server is not root"


@pytest.mark.timeout(900)  # seven builds and smoke tests: a few minutes, more on a busy machine
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the slow part is the same on both databases
def test_every_bundled_env_is_smoke_tested_under_gvisor(clean_factory, hub_settings) -> None:
    _needs_docker()
    require_runsc()
    settings = hub_settings.model_copy(update={"builder": "container", "sandbox_runtime": "runsc"})
    wanted = bundled_envs()
    index_source(clean_factory, LocalSource(make_envs(Path(str(settings.local_source)), *sorted(wanted))))
    Worker(settings, clean_factory).run_until_idle()
    found = verdicts(clean_factory)
    assert set(found) == wanted
    for name, version in found.items():
        with clean_factory() as s:
            log = s.scalars(
                select(StageRun.log).where(StageRun.version_id == version.id, StageRun.stage == "smoke")
            ).one()
        if name == "coding_env":
            assert version.state == "failed" and NO_LANDLOCK in (version.failure_reason or ""), version.failure_reason
        else:
            assert version.state == "passed", (name, version.failure_reason or version.waiting_reason)
            assert GVISOR_LINE in log, (name, log[-2000:])
            assert_container_checks_pass(name, version.rfc008)
