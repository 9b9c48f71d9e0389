"""Whose trouble a missing base image is comes from its registry's HTTP status (served here by a
stand-in registry over real HTTP); a failed build's reason names the step, its command and its first
error line, read from either builder's log; a stand-in base is used by rewriting this build's own
copy of the Dockerfile, never by renaming the engine's images."""

from __future__ import annotations

import socket

from openenv.images._base import with_stand_ins
from openenv.images._registry import ask_registry, image_parts
from openenv.images._signs import failed_step
from tests.support.oci_registry import stand_in_registry


def test_image_references_are_read_as_the_engine_reads_them() -> None:
    assert image_parts("python:3.11-slim") == ("registry-1.docker.io", "library/python", "3.11-slim")
    assert image_parts("acme/tools") == ("registry-1.docker.io", "acme/tools", "latest")
    assert image_parts("ghcr.io/meta-pytorch/openenv-base:latest") == ("ghcr.io", "meta-pytorch/openenv-base", "latest")
    assert image_parts("127.0.0.1:5000/a/b@sha256:ab") == ("127.0.0.1:5000", "a/b", "sha256:ab")
    assert image_parts("localhost/x:1") == ("localhost", "x", "1")


def test_the_registrys_status_says_whose_trouble_a_missing_image_is() -> None:
    with stand_in_registry("open") as host:
        missing = ask_registry(f"{host}/acme/nothing:1")
    assert missing.kind == "missing" and missing.envs_fault and "HTTP 404" in missing.detail
    with stand_in_registry("bearer") as host:  # Docker Hub's way: an anonymous token, then 401 for no such repository
        refused = ask_registry(f"{host}/acme/nothing:1")
    assert refused.kind == "refused" and refused.envs_fault and "HTTP 401" in refused.detail
    with stand_in_registry("trouble") as host:
        troubled = ask_registry(f"{host}/acme/nothing:1")
    assert troubled.kind == "trouble" and not troubled.envs_fault
    with socket.socket() as closed:  # a port nobody listens on: no registry answers
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = ask_registry(f"127.0.0.1:{port}/acme/nothing:1", timeout_s=5)
    assert unreachable.kind == "unreachable" and not unreachable.envs_fault
    assert ask_registry("registry.invalid/acme/nothing:1", timeout_s=5).kind == "unreachable"


_KIT_LOG = """#4 [1/3] FROM docker.io/library/python:3.11-slim
#4 DONE 0.0s
#6 [2/3] COPY . /app/env
#6 DONE 0.1s
#7 [3/3] RUN pip install -r requirements.txt && python -c 'print(1)'
#7 0.512 Collecting left-pad==9.9
#7 1.020 ERROR: Could not find a version that satisfies the requirement left-pad==9.9
#7 1.021 ERROR: No matching distribution found for left-pad==9.9
#7 1.300 client has been closed
#7 ERROR: executor failed running [/bin/sh -c pip install -r requirements.txt]: exit code: 1
------
 > [3/3] RUN pip install -r requirements.txt:
------
executor failed running [/bin/sh -c pip install -r requirements.txt]: exit code: 1"""


def test_the_reason_names_the_failing_step_and_its_first_error_not_the_last_line() -> None:
    # A retry's log follows the first try's, with the vertex numbers starting again: the step is the last try's.
    retry = "#7 [internal] load build context\n#7 DONE 0.0s\n" + _KIT_LOG
    for log in (_KIT_LOG, retry):
        step = failed_step(log.splitlines(), "exit status 1")
        assert step is not None
        assert (step.label, step.command) == ("[3/3]", "RUN pip install -r requirements.txt && python -c 'print(1)'")
        assert step.first_error == "ERROR: Could not find a version that satisfies the requirement left-pad==9.9"
        assert step.describe().startswith("step [3/3] `RUN pip install")

    copy = failed_step(["#8 [4/4] COPY assets/ /app/assets/", '#8 ERROR: "/assets" not found: not found'], "")
    assert (
        copy is not None and copy.describe() == 'step [4/4] `COPY assets/ /app/assets/`: "/assets" not found: not found'
    )

    classic = [
        "Step 3/4 : RUN make",
        " ---> Running in 0123456789ab",
        "cc -c x.c",
        "x.c:1:10: fatal error: Python.h: No such file or directory",
        "make: *** [x.o] Error 1",
    ]
    step = failed_step(classic, "The command '/bin/sh -c make' returned a non-zero code: 2")
    assert step is not None and (step.label, step.command) == ("3/4", "RUN make")
    assert step.first_error == "x.c:1:10: fatal error: Python.h: No such file or directory"
    assert failed_step(["Sending build context", "no steps here"], "boom") is None

    # uv says what failed on one line and why on the next: the reason keeps the cause.
    uv = [
        "#9 [builder 4/4] RUN uv sync --no-editable",
        "#9 0.41 Using CPython 3.11.2",
        "#9 0.52 error: No solution found when resolving dependencies:",
        "#9 0.52   ╰─▶ Because some-missing-module-xyz was not found in the package registry and your project",
        "#9 0.52       depends on some-missing-module-xyz, we can conclude that your project's requirements are",
        '#9 ERROR: process "/bin/sh -c uv sync --no-editable" did not complete successfully: exit code: 1',
    ]
    step = failed_step(uv, "")
    assert step is not None and step.first_error == (
        "error: No solution found when resolving dependencies: Because some-missing-module-xyz was not found in "
        "the package registry and your project"
    )
    # ... and without a terminal, as in a build: "error: ..." then "  cause: Because ...".
    plain = [
        uv[0],
        "#9 0.52 error: No solution found when resolving dependencies",
        "#9 0.52   cause: Because x was not found",
        uv[-1],
    ]
    step = failed_step(plain, "")
    assert step is not None
    assert step.first_error == "error: No solution found when resolving dependencies cause: Because x was not found"


def test_a_stand_in_base_is_named_in_this_builds_own_dockerfile_only() -> None:
    text = "ARG PY=python:3.11-slim\nFROM ${PY} AS build\nRUN true\nFROM --platform=linux/amd64 python:3.11-slim\nFROM build\n"
    rewritten = with_stand_ins(text, {"python:3.11-slim": "openenv-local/python:3.11"}, {})
    assert rewritten.splitlines() == [
        "ARG PY=python:3.11-slim",
        "FROM openenv-local/python:3.11 AS build",
        "RUN true",
        "FROM --platform=linux/amd64 openenv-local/python:3.11",
        "FROM build",
    ]
    assert with_stand_ins(text, {}, {}) == text
