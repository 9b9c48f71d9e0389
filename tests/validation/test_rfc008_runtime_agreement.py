"""RFC 008 at the runtime level, against upstream OpenEnv 0.10.0's own validator (its own venv, its
own CLI): upstream builds each env folder with its own Docker provider (`docker build`, then
`docker run` with the port published on 127.0.0.1), replays the manifest's runtime plan over its
WebSocket transport and grades what it saw; ours serves the same folder as a process and replays the
same plan. On every check upstream implements up to the runtime level, the two give one status:
on bundled envs, which pass, and on copies of echo_env with one fault each, which fail the check
that fault is about (and only that one).

What stands in for what this machine cannot reach: upstream's build starts FROM `python:3.11-slim`
and pip-installs `openenv-hub[server]==0.1.0` from PyPI. Here each copy's Dockerfile names a local
image instead (its one changed line): the tests' base image, with this checkout's SDK wheel
installed and on pip's find-links, so the Dockerfile's own `pip install` finds the package it names.
Upstream starts a `no-network` env through a helper image pinned by digest on Docker Hub, which
cannot be made locally, so the copies declare `public`; that changes only how upstream's provider
reaches the port. `runtime.network_policy` then skips in both: upstream's without its helper,
ours because a served folder has no container to measure (the Hub measures it: docs/validate.md).
Upstream runs the runtime level only on a manifest of schema 2: the bundled envs declare
`validation.execution`, with their oracle's plan as the runtime plan.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from openenv.images import docker_client, local_sdk_wheel
from tests.support.images import remove_tagged
from tests.support.servers import ROOT
from tests.support.upstream_validate import upstream_validate

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.docker]

# What upstream 0.10.0 implements up to the runtime level (test_rfc008.py checks the six against
# its registry); every other id of its report says "grader not implemented in this build".
UPSTREAM_RUNTIME = (
    "static.manifest",
    "runtime.startup",
    "runtime.reward_well_formed",
    "runtime.observation_schema",
    "runtime.state_contract",
    "runtime.network_policy",
)

# case -> (the bundled env it copies, [(file, text, replacement)], the ids both must fail)
CASES: dict[str, tuple[str, list[tuple[str, str, str]], set[str]]] = {
    "echo_env": ("echo_env", [], set()),
    "grid_world_env": ("grid_world_env", [], set()),
    # the oracle's 1,000-character message earns 100, above the declared top
    "reward_above_range": (
        "echo_env",
        [("openenv.yaml", "range: [0.0, 100.0]", "range: [0.0, 50.0]")],
        {"runtime.reward_well_formed"},
    ),
    # every step counts twice
    "steps_miscounted": (
        "echo_env",
        [
            (
                "server/echo_environment.py",
                "        self._last = action.message\n        length = len(action.message)\n        self._steps += 1\n",
                "        self._last = action.message\n        length = len(action.message)\n        self._steps += 2\n",
            )
        ],
        {"runtime.state_contract"},
    ),
    # /schema says a message is at most 10 characters long; the oracle's is 1,000
    "observation_off_schema": (
        "echo_env",
        [
            (
                "models.py",
                "message_length: int = Field(default=0, ge=0,",
                'message_length: int = Field(default=0, ge=0, json_schema_extra={"maximum": 10},',
            )
        ],
        {"runtime.observation_schema"},
    ),
    # the app fails on import: the server never answers
    "fails_to_start": (
        "echo_env",
        [("server/app.py", "app = create_app(", 'raise RuntimeError("this env does not start")\napp = create_app(')],
        {"runtime.startup"},
    ),
}


# Labels are inherited: every image built from the stand-in carries this run's label.
RUN_LABEL = "org.openenv.test.upstream-runtime"


@pytest.fixture(scope="module")
def standin_base() -> Iterator[str]:
    """`python:3.11-slim` with PyPI's `openenv-hub`, as a local image: the tests' base image with this
    checkout's SDK wheel installed and on pip's find-links. Every image built from it (upstream's
    builds are untagged) is removed at the end, by the label it passes on."""
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    assert base, "OPENENV_TEST_BASE_IMAGE is not set: run `bash scripts/test`"
    client = docker_client()
    prefix = f"openenv-test-upstream-runtime-{uuid.uuid4().hex[:8]}"
    wheel = local_sdk_wheel()
    context = Path(os.environ.get("TMPDIR", "/tmp")) / f"{prefix}-context"
    context.mkdir()
    try:
        shutil.copy(wheel, context / wheel.name)
        (context / "Dockerfile").write_text(
            f"FROM {base}\nLABEL {RUN_LABEL}={prefix}\nCOPY {wheel.name} /opt/openenv-sdk/\n"
            f'RUN pip install --no-cache-dir "/opt/openenv-sdk/{wheel.name}[server]"\n'
            "ENV PIP_FIND_LINKS=/opt/openenv-sdk\n"
        )
        tag = f"{prefix}/python:3.11-slim"
        client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        yield tag
    finally:
        shutil.rmtree(context, ignore_errors=True)
        for image in client.images.list(filters={"label": f"{RUN_LABEL}={prefix}"}):
            if not image.tags:  # upstream's builds; the stand-in itself goes by its tag
                with contextlib.suppress(docker.errors.NotFound):
                    client.images.remove(image.id)
        remove_tagged(client, prefix)


def _copy(case: str, tmp: Path, base: str) -> Path:
    env, edits, _ = CASES[case]
    folder = tmp / case / env  # named as the env: the folder's name is the env's
    shutil.copytree(ROOT / "envs" / env, folder, ignore=shutil.ignore_patterns("__pycache__"))
    edits = [
        ("Dockerfile", "ARG BASE_IMAGE=python:3.11-slim\n", f"ARG BASE_IMAGE={base}\n"),
        (
            "openenv.yaml",
            "  network: {mode: no-network}\n",
            "  network: {mode: public}\n",
        ),
        *edits,
    ]
    for name, text, replacement in edits:
        path = folder / name
        source = path.read_text()
        assert source.count(text) == 1, f"{env}/{name} no longer has {text!r} once: mend the case"
        path.write_text(source.replace(text, replacement))
    return folder


def _statuses(report: dict[str, object]) -> dict[str, str]:
    return {r["check_id"]: r["status"] for r in report["results"]}  # type: ignore[index, union-attr]


@pytest.mark.timeout(900)
def test_runtime_verdicts_agree_with_upstreams_validator(
    upstream010_python: str, standin_base: str, tmp_path: Path
) -> None:
    folders = {case: _copy(case, tmp_path, standin_base) for case in CASES}
    args = ["--level", "runtime", "--json", "--policy", "v2"]
    theirs = upstream_validate(upstream010_python, [[str(f), *args] for f in folders.values()], timeout_s=840)
    seen, expected = {}, {}
    for (case, folder), upstream in zip(folders.items(), theirs, strict=True):
        assert upstream["report"] is not None, upstream
        results = upstream["report"]["results"]
        implemented = [r["check_id"] for r in results if not any("not implemented" in e for e in r["evidence"])]
        assert sorted(implemented) == sorted(UPSTREAM_RUNTIME), (case, implemented)
        ours = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "validate", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ours.stdout.startswith("{"), ours.stderr[-2000:]
        mine = _statuses(json.loads(ours.stdout))
        theirs_status = _statuses(upstream["report"])
        # per case: each implemented id's (upstream's status, ours), and (upstream's exit code, ours)
        seen[case] = (
            {cid: (theirs_status[cid], mine.get(cid)) for cid in UPSTREAM_RUNTIME},
            (upstream["exit_code"], ours.returncode),
        )
        # what both must say: the case's fault fails its check; every other check the plan reached passes
        fails = CASES[case][2]
        after_start = "runtime.startup" in fails  # nothing runs past a server that does not start
        want = {
            cid: "fail"
            if cid in fails
            else "skip"
            if cid == "runtime.network_policy" or (after_start and cid.startswith("runtime."))
            else "pass"
            for cid in UPSTREAM_RUNTIME
        }
        expected[case] = ({cid: (w, w) for cid, w in want.items()}, (1, 1) if fails else (0, 0))
    assert seen == expected
