"""An env `openenv import` wrote (from a Gymnasium id; from a Verifiers and an ORS source) goes
through the Hub's whole pipeline (fetch → validate → build → smoke with RFC 008's levels → publish)
and passes, as the bundled envs do: its image installs its library from its pinned requirements,
and its oracle and canaries hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, verdicts
from tests.support.cli import Run
from tests.support.dockerd import engine_past_its_start_up

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_an_imported_gymnasium_env_passes_the_hubs_pipeline(
    clean_factory, hub_settings: HubSettings, run_cli: Run
) -> None:
    _needs_docker()
    engine_past_its_start_up()  # a verdict about the env's own build, on an engine up a while
    settings = hub_settings.model_copy(update={"builder": "container"})
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    made = run_cli("import", "FrozenLake-v1", "-o", str(root / "frozen_lake_env"))
    assert made.returncode == 0, made.stderr
    index_source(clean_factory, LocalSource(root, trusted=False))  # as a Space is: its code runs only in its container
    assert Worker(settings, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]
    version = verdicts(clean_factory)["frozen_lake_env"]
    assert (version.state, version.build_status, version.smoke_status) == ("passed", "passed", "passed")
    assert version.validation_status in ("pass", "warn")
    results = {r["check_id"]: r for r in version.rfc008["results"]}
    for check in ("semantic.oracle_max", "semantic.canary_floor", "semantic.floor_gap", "runtime.oracle_containment"):
        assert results[check]["status"] == "pass", results[check]


# One backend: the builds (pip installing each library) are what take the time, and the Gymnasium
# test above already runs the same pipeline on both databases.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("fixture", "folder"), [("vf_arithmetic", "vf_arithmetic_env"), ("ors_guess", "ors_guess_env")]
)
def test_an_imported_verifiers_or_ors_env_passes_the_hubs_pipeline(
    fixture: str, folder: str, clean_factory, hub_settings: HubSettings, run_cli: Run
) -> None:
    """Its image installs the library (`verifiers`, `openreward`) from its pinned requirements and
    runs the copied source; the smoke test plays it, and RFC 008's levels replay the answer plans
    the source carries (tests/fixtures/imports/*/openenv/)."""
    _needs_docker()
    engine_past_its_start_up()
    settings = hub_settings.model_copy(update={"builder": "container"})
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / fixture
    made = run_cli("import", str(source), "-o", str(root / folder))
    assert made.returncode == 0, made.stderr
    index_source(clean_factory, LocalSource(root, trusted=False))
    ran = Worker(settings, clean_factory).run_until_idle(max_wait_s=1)
    version = verdicts(clean_factory)[folder]
    assert ran == ["passed"], (version.failure_stage, version.failure_code, version.failure_reason)
    assert (version.state, version.build_status, version.smoke_status) == ("passed", "passed", "passed")
    assert version.validation_status in ("pass", "warn")
