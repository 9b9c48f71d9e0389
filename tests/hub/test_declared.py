"""What an env declares in openenv.yaml's `validation:` block, as the Hub reads and uses it: the
declared resources are granted up to the Hub's caps, a network it cannot give is refused with a
reason, and rewards outside the declared range are reported (never a failure: the env runs)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy import select

from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.sandbox import grant
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from openenv.declared import read_declared
from tests.support.servers import ROOT
from tests.support.systems import require_system

BLOCK = """
validation:
  reward: {range: [0.0, 0.1], oracle_tolerance: 0.0, floor_margin: 0.1}
  resources: {cpu: 0.5, memory_mb: 300, disk_mb: 100, episode_timeout_s: 30}
  network: {mode: public}
  capabilities: {verifier: {kind: reward_channel}}
  types: {tags: [demo]}
"""


def test_the_block_is_read_leniently_and_problems_are_named() -> None:
    import yaml

    good = read_declared(yaml.safe_load("name: x" + BLOCK))
    assert (
        good.present
        and not good.problems
        and good.reward.range == (0.0, 0.1)
        and good.other["types"] == {"tags": ["demo"]}
    )
    assert good.reward_outside([0.0, 0.05, 0.5, -1]) == [0.5, -1]
    bad = read_declared(
        {
            "validation": {
                "reward": {"range": [1, 0]},
                "resources": {"cpu": -1, "memory_mb": 10},
                "network": {"mode": "allowlist"},
            }
        }
    )
    where = sorted(w for w, _ in bad.problems)
    assert where == ["validation.network.allowed_hosts", "validation.resources.cpu", "validation.reward.range"], (
        bad.problems
    )
    beyond = read_declared({"validation": {"reward": {"oracle_tolerance": 0.5}}})
    assert any("beyond what validators accept" in m for _, m in beyond.problems)
    assert not read_declared({"name": "x"}).present


def test_granted_resources_are_capped_by_the_hubs_limits() -> None:
    settings = HubSettings(smoke_memory="1g", smoke_cpus=1.0, local_source=None)
    options, notes = grant(
        settings,
        read_declared({"validation": {"resources": {"cpu": 4, "memory_mb": 8192}, "network": {"mode": "no-network"}}}),
    )
    assert options == {"mem_limit": "1024m", "memswap_limit": "1024m", "nano_cpus": 1_000_000_000}
    assert (
        "capped by the Hub's limits" in notes[0]
        and notes[1] == "declared network: no-network; granted (the sandbox reaches nothing)"
    )
    assert grant(settings, read_declared(None)) == ({}, [])


def test_the_pipeline_uses_what_the_env_declares(clean_factory, hub_settings: HubSettings) -> None:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    root = Path(hub_settings.local_source)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    manifest = root / "echo_env" / "openenv.yaml"
    text = manifest.read_text()
    manifest.write_text(text[: text.index("\nvalidation:")] + "\n" + BLOCK)  # echo's own block, replaced
    # RFC 008's gate off: this is the smoke stage's own reading of the block (a reward outside the
    # declared range is a warning there); with the gate on, RFC 008's runtime.reward_well_formed
    # decides such a revision (tests/hub/test_rfc008_gate.py).
    settings = hub_settings.model_copy(update={"builder": "container", "rfc008_gate": "off"})
    index_source(clean_factory, LocalSource(root, trusted=False))
    assert Worker(settings, clean_factory).run_until_idle() == ["passed"]  # a contract warning is not a failure
    with clean_factory() as s:
        smoke = s.scalar(select(StageRun).where(StageRun.stage == "smoke")).log
        event = s.scalar(select(EnvEvent).where(EnvEvent.kind == "smoke_tested"))
        version = s.scalar(select(EnvVersion))
    assert "declared resources: 0.5 cpu, 300 MB; granted 0.5 cpu, 300 MB" in smoke
    assert "declared network: public; not granted" in smoke
    assert "outside the declared range [0.0, 0.1]" in smoke and event.details["rewards_outside_declared_range"]
    checks = {c["id"]: c["status"] for c in version.validation["checks"]}
    assert checks["manifest.validation"] == "pass"
    # the RFC 008 report says the same of the rewards, by check id
    [rewards] = [r for r in version.rfc008["results"] if r["check_id"] == "runtime.reward_well_formed"]
    assert rewards["status"] in ("fail", "skip")  # no plan declared here to replay: it cannot look
    assert version.rfc008["lane"] == "hub"
