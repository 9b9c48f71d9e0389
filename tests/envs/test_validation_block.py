"""Every bundled env declares its contract in openenv.yaml's `validation:` block (RFC 008, the shape
upstream OpenEnv 0.10.0 reads) and keeps it: the tools and tasks it declares are the ones it
serves, its image carries the manifest's OCI labels and pins what it installs, and its oracle
plan, replayed over a WebSocket session, ends on the top of the declared reward range while its
canaries (deliberately bad play) end at its bottom."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml

import openenv
from openenv import GenericEnvClient, NoTasksError
from openenv.dockerfile import dockerfile_instructions
from openenv.validation.rfc008 import Level, validate_package
from tests.envs.conftest import serve_env
from tests.envs.images import ENV_NAMES
from tests.support.servers import ROOT

ALL_ENVS = ("echo_env", *ENV_NAMES)
_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9][0-9A-Za-z.+!-]*")


def _manifest(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "envs" / name / "openenv.yaml").read_text())


def _labels(dockerfile: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for ins in dockerfile_instructions(dockerfile):
        if ins.keyword == "LABEL":
            found.update(word.partition("=")[::2] for word in shlex.split(ins.args))
    return found


@pytest.mark.parametrize("name", ALL_ENVS)
def test_the_block_image_and_requirements_say_what_the_env_is(name: str) -> None:
    manifest = _manifest(name)
    block = manifest["validation"]
    assert block["types"] == {"tags": [t for t in manifest["tags"] if t != "openenv"]}
    assert block["network"] == {"mode": "no-network"} and block["capabilities"]["verifier"] == {
        "kind": "reward_channel"
    }
    assert block["resources"]["cpu"] >= 1.0 and block["resources"]["memory_mb"] >= 1024  # the Hub's smoke defaults
    dockerfile = (ROOT / "envs" / name / "Dockerfile").read_text()
    assert _labels(dockerfile) == {
        "org.opencontainers.image.title": manifest["name"],
        "org.opencontainers.image.description": manifest["description"],
        "org.opencontainers.image.version": str(manifest["version"]),
    }
    assert f'ARG OPENENV_SDK="openenv-hub[server]=={openenv.__version__}"' in dockerfile
    for line in (ROOT / "envs" / name / "server" / "requirements.txt").read_text().splitlines():
        assert not line.strip() or line.startswith("#") or _PIN.fullmatch(line.strip()), line


@pytest.mark.parametrize("name", ALL_ENVS)
def test_declared_tools_and_tasks_are_what_the_env_serves(name: str) -> None:
    capabilities = _manifest(name)["validation"]["capabilities"]
    with serve_env(name) as url, GenericEnvClient(url).sync() as env:
        assert sorted(t.name for t in env.list_tools()) == sorted(capabilities.get("declared_tools", []))
        if capabilities.get("task_api"):
            splits = [s["name"] for s in env.list_splits()]
            assert {s: env.num_tasks(s) for s in splits} == capabilities["declared_task_count"]
        else:
            assert "declared_task_count" not in capabilities
            with pytest.raises(NoTasksError):
                env.list_splits()


@pytest.mark.parametrize("name", ALL_ENVS)
def test_every_level_holds_or_says_why_it_could_not_look(name: str) -> None:
    """`openenv validate --level semantic` on the env served here: nothing fails; the oracle's
    plan ends on the top of the declared range, the canaries at its bottom, both replay alike."""
    report, _ = validate_package(ROOT / "envs" / name, level=Level.SEMANTIC)
    assert [(r.check_id, r.evidence) for r in report.results if r.status in ("fail", "error")] == []
    statuses = report.statuses()
    held = (
        "runtime.reward_well_formed",
        "runtime.observation_schema",
        "runtime.state_contract",
        "runtime.seed_control",
        "runtime.episode_determinism",
        "runtime.episode_isolation",
        "runtime.tool_declaration_accuracy",
        "semantic.oracle_max",
        "semantic.canary_floor",
        "semantic.floor_gap",
        "semantic.verifier_determinism",
        "semantic.replayability",
    )
    assert {c: statuses[c] for c in held} == dict.fromkeys(held, "pass")
    oracle = report.result("semantic.oracle_max")
    assert (
        oracle is not None and oracle.measured["oracle_reward"] == _manifest(name)["validation"]["reward"]["range"][1]
    )
    assert all(r.evidence for r in report.results if r.status == "skip")  # a skip says why
