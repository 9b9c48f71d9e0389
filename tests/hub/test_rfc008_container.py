"""RFC 008's measurements of an env's container (hub_service/pipeline/rfc008_container.py), on real
containers of the Docker engine: a confined echo server passes all five, under runc and gVisor; a
container the sandbox did not confine, one whose process the kernel killed for memory, one that
used more than it declares and an image that ships its oracle fail the check that saw it. The
pipelines on Docker, Podman and gVisor assert the five on every bundled env
(test_registry_publish.py, test_gvisor_pipeline.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hub_service.pipeline.rfc008_container import ContainerMeasures
from hub_service.pipeline.stages import read_folder_declared
from hub_service.sandbox import confined_provider, grant
from hub_service.settings import HubSettings
from openenv.validation.rfc008 import Level, validate_package
from tests.hub.conftest import IMAGE_PREFIX
from tests.support.servers import ROOT
from tests.support.systems import require_runsc, require_system

pytestmark = [pytest.mark.docker]
CONTAINER_CHECKS = (
    "runtime.network_policy",
    "runtime.host_containment",
    "runtime.resource_bounds",
    "runtime.oracle_containment",
    "semantic.resource_envelope",
)
ECHO = ROOT / "envs" / "echo_env"


def assert_container_checks_pass(name: str, report: dict[str, Any] | None) -> None:
    """The Hub measured the five on the revision's container and each passed (a pipeline test's check)."""
    assert report is not None, name
    results = {r["check_id"]: r for r in report["results"]}
    for check in CONTAINER_CHECKS:
        assert results[check]["status"] == "pass", (name, results[check])
    probes = results["runtime.network_policy"]["measured"]["probes"]
    assert probes and all(p["subject"].startswith("denied") and p["control"] == "reachable" for p in probes), probes


@pytest.fixture(scope="module")
def echo_image() -> str:
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    from openenv.images import build_image

    tag = f"{IMAGE_PREFIX}/measured-echo:1"
    build_image(ECHO, tag, base_image=base)
    return tag


@pytest.fixture()
def settings(tmp_path: Path) -> HubSettings:
    return HubSettings(data_dir=tmp_path / "hubdata", base_image=os.environ.get("OPENENV_TEST_BASE_IMAGE"))


def _manifest(**resources: Any) -> Any:
    report, _ = validate_package(ECHO, level=Level.STATIC, import_app=False)
    manifest = report.manifest
    assert manifest is not None
    if resources:
        manifest = manifest.model_copy(update={"resources": manifest.resources.model_copy(update=resources)})
    return manifest


def _measure(
    settings: HubSettings, provider: Any, manifest: Any, *, gvisor: bool = False, folder: Path = ECHO
) -> dict[str, Any]:
    """Start `provider`, play an episode of echo between the brackets, and give the five results."""

    async def run() -> dict[str, Any]:
        from echo_env import EchoAction, EchoEnv

        url = await provider.astart()
        try:
            measures = await asyncio.to_thread(ContainerMeasures.of, settings, provider, gvisor=gvisor)
            measures.begin_episodes()
            async with EchoEnv(url) as env:
                await env.reset()
                for i in range(20):
                    await env.step(EchoAction(message="x" * i))
            measures.end_episodes()
            results = await asyncio.to_thread(measures.results, manifest, folder)
        finally:
            await provider.astop()
        return {r.check_id: r for r in results}

    return asyncio.run(run())


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_a_confined_echo_server_passes_every_container_check(
    echo_image: str, settings: HubSettings, runtime: str
) -> None:
    if runtime == "runsc":
        require_runsc()
    settings = settings.model_copy(update={"sandbox_runtime": runtime})
    manifest = _manifest()
    overrides, _ = grant(settings, read_folder_declared(ECHO))
    provider = confined_provider(settings, echo_image, startup_timeout_s=120, overrides=overrides)
    results = _measure(settings, provider, manifest, gvisor=runtime == "runsc")
    assert {c: results[c].status for c in CONTAINER_CHECKS} == dict.fromkeys(CONTAINER_CHECKS, "pass"), results
    report = {"results": [r.model_dump(mode="json") for r in results.values()]}
    assert_container_checks_pass("echo_env", report)
    network = results["runtime.network_policy"].measured
    assert {p["kind"] for p in network["probes"]} == {"tcp", "udp"} and 8000 in network["listening_ports"]
    bounds = results["runtime.resource_bounds"].measured
    # What the kernel enforces is what echo declares (1 CPU, 1024 MB), the Hub's defaults capping it.
    assert (bounds["memory_limit_mb"], bounds["cpu_limit"]) == (1024.0, 1.0) and bounds["oom_kills"] == 0
    assert 0 < bounds["peak_memory_mb"] < 1024
    envelope = results["semantic.resource_envelope"].measured
    assert envelope["episodes_cpu_s"] > 0 and envelope["episodes_wall_s"] > 0
    oracle = results["runtime.oracle_containment"].measured
    assert oracle["readable_copies"] == [] and oracle["oracle"] == "validation/oracle.json"
    if runtime == "runc":
        assert results["runtime.host_containment"].measured["processes"] >= 1
        assert envelope["disk_written_mb"] is not None and envelope["disk_written_mb"] < 512


@pytest.fixture()
def open_network() -> Iterator[str]:
    """A plain bridge network of Docker's (routes out, reaches the host): what the sandbox must never give."""
    from openenv.engines import engine

    client = engine().client()
    name = f"oe-test-open-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, driver="bridge")
    try:
        yield name
    finally:
        network.remove()


def test_an_unconfined_container_fails_network_policy_and_host_containment(
    echo_image: str, settings: HubSettings, open_network: str
) -> None:
    """As if the sandbox had failed: root, every default capability, a network that reaches the host.
    The env declares no-network; the Hub's own sink on the host answers it, and its processes are root."""
    from openenv.client.providers import ContainerProvider

    provider = ContainerProvider(
        echo_image, pull="never", startup_timeout_s=120, run_options={"network_mode": open_network}
    )
    results = _measure(settings, provider, _manifest())
    network, containment = results["runtime.network_policy"], results["runtime.host_containment"]
    assert network.status == "fail", network
    assert any("reachable from the env's namespace" in line for line in network.evidence), network.evidence
    assert containment.status == "fail", containment
    assert any("runs as root" in line for line in containment.evidence), containment.evidence
    assert any("holds capabilities" in line for line in containment.evidence), containment.evidence


def test_a_container_at_its_memory_limit_fails_resource_bounds(settings: HubSettings) -> None:
    """A process of the container asks for more than its 96 MB and the kernel kills it; the container
    lives on (its first process is not the one killed), and the check says what the kernel did."""
    from openenv.engines import engine

    api = engine().client().api
    host_config = api.create_host_config(mem_limit="96m", memswap_limit="96m", nano_cpus=int(1e9), pids_limit=64)
    written = "python -c 'b = bytearray(300_000_000)'; touch /tmp/done; sleep 120"
    created = api.create_container(
        os.environ["OPENENV_TEST_BASE_IMAGE"], command=["sh", "-c", written], host_config=host_config, user="1000:1000"
    )
    try:
        api.start(created["Id"])
        pid = int(api.inspect_container(created["Id"])["State"]["Pid"])
        ends = time.monotonic() + 60
        while not Path(f"/proc/{pid}/root/tmp/done").exists():
            assert time.monotonic() < ends, api.logs(created["Id"])
            time.sleep(0.2)
        provider = SimpleNamespace(client=engine().client(), container_id=created["Id"], engine=engine())
        measures = ContainerMeasures.of(settings, provider, gvisor=False)
        results = {r.check_id: r for r in measures.results(_manifest())}
    finally:
        api.remove_container(created["Id"], force=True)
    bounds = results["runtime.resource_bounds"]
    assert bounds.status == "fail" and bounds.measured["oom_kills"] == 1, bounds
    assert "killed 1 of its processes for memory" in bounds.evidence[-1] and bounds.measured["memory_limit_mb"] == 96.0


def test_an_episode_using_more_than_declared_fails_resource_envelope(echo_image: str, settings: HubSettings) -> None:
    """Echo's server holds tens of MB; declared at 16 MB (and run under the Hub's 1 GB), its envelope
    is over what it declares."""
    overrides, _ = grant(settings, read_folder_declared(ECHO))
    provider = confined_provider(settings, echo_image, startup_timeout_s=120, overrides=overrides)
    results = _measure(settings, provider, _manifest(memory_mb=16))
    envelope = results["semantic.resource_envelope"]
    assert envelope.status == "fail" and "over the declared 16 MB" in envelope.evidence[0], envelope
    assert results["runtime.resource_bounds"].status == "pass"


def test_an_image_that_ships_its_oracle_fails_oracle_containment(
    settings: HubSettings, tmp_path: Path, echo_image: str
) -> None:
    """echo_env without the .dockerignore line that keeps validation/ out: the oracle is in the image,
    readable by the env's user, and the check names where (found by content, not by name)."""

    from openenv.images import build_image

    folder = tmp_path / "echo_env"
    shutil.copytree(ECHO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    ignore = folder / ".dockerignore"
    ignore.write_text(ignore.read_text().replace("validation/\n", ""))
    (folder / "Dockerfile").write_text(
        (folder / "Dockerfile").read_text() + "RUN cp /app/env/validation/oracle.json /usr/share/answers.txt\n"
    )
    tag = f"{IMAGE_PREFIX}/measured-echo:oracle"
    build_image(folder, tag, base_image=os.environ["OPENENV_TEST_BASE_IMAGE"])
    overrides, _ = grant(settings, read_folder_declared(ECHO))
    provider = confined_provider(settings, tag, startup_timeout_s=120, overrides=overrides)
    oracle = _measure(settings, provider, _manifest(), folder=folder)["runtime.oracle_containment"]
    assert oracle.status == "fail", oracle
    assert sorted(oracle.measured["readable_copies"]) == ["/app/env/validation/oracle.json", "/usr/share/answers.txt"]
    assert "/app/env/validation/oracle.json" in oracle.evidence[0] and ".dockerignore" in str(oracle.remediation)


def _cross_host(settings: HubSettings, image: str, folder: Path) -> dict[str, Any]:
    """hub.cross_host_determinism and semantic.verifier_portability of `image` (an echo) confined
    on this engine, against the second one."""
    from hub_service.pipeline.rfc008_cross_host import Revision, cross_host_results

    declared = read_folder_declared(folder)
    overrides, _ = grant(settings, declared)
    provider = confined_provider(settings, image, startup_timeout_s=120, overrides=overrides)

    async def run() -> Any:
        url = await provider.astart()
        try:
            revision = Revision(image, 8000, overrides, folder, url, _manifest(), declared)
            results = await asyncio.to_thread(cross_host_results, settings, revision)
        finally:
            await provider.astop()
        return {r.check_id: r for r in results}

    return asyncio.run(run())


def test_a_second_engine_plays_the_same_plan_the_same_and_keeps_no_copy(settings: HubSettings, echo_image: str) -> None:
    """scripts/docker-engine2 stands in for the second machine: it has never seen the image; the Hub
    copies it there, plays echo's oracle from the same seed on both, and removes its copy."""
    from tests.support.registry import engine2

    other = engine2()
    settings = settings.model_copy(update={"cross_host_engine": os.environ["OPENENV_TEST_DOCKER2_HOST"]})
    results = _cross_host(settings, echo_image, ECHO)
    result, portable = results["hub.cross_host_determinism"], results["semantic.verifier_portability"]
    assert result.status == "pass", result
    first, second = result.measured["engines"]
    assert first != second and result.measured["observations"] >= 2
    assert result.measured["plan"] == "validation/oracle.json"
    # The verifier on both: the oracle earns the top, each canary the floor, the same on both machines.
    assert portable.status == "pass", portable
    rewards = portable.measured["rewards"]
    assert rewards["the oracle"] == [100.0, 100.0] and len(rewards) >= 2
    assert all(a == b and a is not None for a, b in rewards.values()), rewards
    assert not other.images.list(name=echo_image.split(":")[0])  # the copy is gone again
    other.close()


def test_an_env_that_answers_by_its_machine_fails_cross_host_determinism(
    settings: HubSettings, tmp_path: Path, echo_image: str
) -> None:
    """An echo whose first observation carries its container's host name: the same on every play in
    one container (runtime.episode_determinism cannot see it), different on another machine."""

    from openenv.images import build_image

    folder = tmp_path / "echo_env"
    shutil.copytree(ECHO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    code = folder / "server" / "echo_environment.py"
    code.write_text(
        code.read_text().replace(
            "return EchoObservation(echoed_message=READY,",
            "return EchoObservation(echoed_message=READY + __import__('socket').gethostname(),",
        )
    )
    tag = f"{IMAGE_PREFIX}/measured-echo:by-host"
    build_image(folder, tag, base_image=os.environ["OPENENV_TEST_BASE_IMAGE"])
    settings = settings.model_copy(update={"cross_host_engine": os.environ["OPENENV_TEST_DOCKER2_HOST"]})
    results = _cross_host(settings, tag, folder)
    result = results["hub.cross_host_determinism"]
    assert result.status == "fail" and "differ at observation 0" in result.evidence[0], result
    assert "never from the machine" in str(result.remediation)
    # Its verifier does not look at the host name: the rewards travel.
    assert results["semantic.verifier_portability"].status == "pass"


def test_without_a_second_engine_cross_host_determinism_says_why_it_skips(settings: HubSettings) -> None:
    from hub_service.pipeline.rfc008_cross_host import Revision, cross_host_results

    revision = Revision("unused", 8000, {}, ECHO, "http://127.0.0.1:9", _manifest(), read_folder_declared(ECHO))
    unset = cross_host_results(settings, revision)
    assert [r.check_id for r in unset] == ["hub.cross_host_determinism", "semantic.verifier_portability"]
    assert all(r.status == "skip" and "cross_host_engine is unset" in r.evidence[0] for r in unset)
    gone = settings.model_copy(update={"cross_host_engine": "unix:///nonexistent/docker.sock"})
    down = cross_host_results(gone, revision)
    assert all(r.status == "skip" and "does not answer" in r.evidence[0] and "trouble" in r.evidence[0] for r in down)


def _cache_env(root: Path, name: str, step: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text(
        "ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\n"
        f"RUN --mount=type=cache,target=/cache,id=shared-{root.name} {step}\n"
    )
    return folder


def _seen(image: str) -> str:
    from openenv.engines import engine

    client = engine().client()
    try:
        return client.containers.run(image, ["cat", "/seen"], remove=True).decode().strip()
    finally:
        client.images.remove(image, force=True)


def test_no_env_reads_what_another_left_in_a_build_cache_mount(tmp_path: Path, settings: HubSettings) -> None:
    """A cache mount is not part of a layer's cache key: one env's build could leave a file there for
    another's to install. Unscoped (as a plain `docker build` does) the second build reads it; built
    by the Hub (each env's cache mounts under its own id), it does not, and hub.layer_isolation says
    which ids it gave."""
    from hub_service.pipeline.builders import ContainerBuilder
    from hub_service.pipeline.rfc008 import build_results
    from openenv.images import build_image

    base = os.environ["OPENENV_TEST_BASE_IMAGE"]
    run = uuid.uuid4().hex[:8]  # fresh layers and a fresh cache for this test
    root = tmp_path / f"c{run}"
    writer = _cache_env(root, "writer", f"sh -c 'echo poisoned-{run} > /cache/poison'")
    reader = _cache_env(root, "reader", f"sh -c 'cat /cache/poison > /seen 2>/dev/null || echo clean-{run} > /seen'")
    # As any engine builds them: the reader gets the writer's file.
    build_image(writer, f"{IMAGE_PREFIX}/cache-writer:{run}", base_image=base)
    build_image(reader, f"{IMAGE_PREFIX}/cache-reader:{run}", base_image=base)
    assert _seen(f"{IMAGE_PREFIX}/cache-reader:{run}") == f"poisoned-{run}"
    # As the Hub builds them (a new id for the shared cache: nothing in it yet).
    (writer / "Dockerfile").write_text((writer / "Dockerfile").read_text().replace("shared-", "hub-"))
    (reader / "Dockerfile").write_text((reader / "Dockerfile").read_text().replace("shared-", "hub-") + "\n")
    settings = settings.model_copy(update={"builder": "container", "image_prefix": IMAGE_PREFIX})
    ContainerBuilder().build(settings, writer, "mallory", "writer", run, lambda line: None)
    built = ContainerBuilder().build(settings, reader, "alice", "reader", run, lambda line: None)
    assert built.image_ref is not None and _seen(built.image_ref) == f"clean-{run}"
    result = build_results(built)[0]
    assert result.status == "pass" and result.measured["cache_mounts"] == [f"openenv-hub:alice/reader:hub-c{run}"]


def test_cache_mounts_are_scoped_where_they_can_be_and_the_rest_is_said(tmp_path: Path) -> None:
    """Literal mounts among a RUN's leading flags (on its line or the lines that go on with flags)
    get the scope; one with a variable is left out (a cache only saves time); one elsewhere refuses
    the build, saying where and what to do."""
    from openenv.dockerfile import scope_cache_mounts
    from openenv.images import ImageBuildError, build_image

    text = (
        "FROM x\n"
        "RUN --mount=type=cache,target=/root/.cache/pip pip install a\n"
        "RUN --mount=type=cache,id=pip,target=/c --mount=type=bind,source=.,target=/s true\n"
        "RUN --mount=type=cache,target=$HOME/.cache true\n"
        "RUN \\\n    --mount=type=cache,target=/x \\\n    echo multi\n"
    )
    scoped = scope_cache_mounts(text, "openenv-hub:a/b")
    assert scoped.scoped == ["openenv-hub:a/b:/root/.cache/pip", "openenv-hub:a/b:pip", "openenv-hub:a/b:/x"]
    assert scoped.dropped == ["line 4: --mount=type=cache,target=$HOME/.cache"] and scoped.unscoped == []
    assert "RUN true\n" in scoped.text and "--mount=type=bind,source=.,target=/s true" in scoped.text
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM x\nRUN echo go \\\n  --mount=type=cache,target=/y\n")
    with pytest.raises(
        ImageBuildError, match=r"line 3: --mount=type=cache,target=/y.*put --mount flags right after RUN"
    ):
        build_image(folder, "never:1", cache_scope="openenv-hub:a/b")


@pytest.mark.parametrize(
    ("step", "status"),
    [
        ("python -c \"open('/made', 'w').write('the same every time')\"", "pass"),
        ("python -c \"import os; open('/made', 'wb').write(os.urandom(16))\"", "fail"),
        (None, "pass"),  # envs/echo_env itself: pip installs, .pyc files and all (ARG SOURCE_DATE_EPOCH)
    ],
    ids=["same-bytes", "random-bytes", "echo_env"],
)
def test_a_revision_built_twice_from_scratch_is_compared_layer_by_layer(
    tmp_path: Path, settings: HubSettings, step: str | None, status: str
) -> None:
    """static.reproducible_build: with reproducible_build_check on, the Hub builds the revision a
    second time with no cache and compares the images' files layer by layer (timestamps aside): a
    step writing the same bytes passes, one writing random bytes fails, naming its layer, its step
    and the file; the second image is not kept."""
    from hub_service.pipeline.builders import ContainerBuilder
    from hub_service.pipeline.rfc008 import build_results
    from openenv.engines import engine

    run = uuid.uuid4().hex[:8]
    folder = tmp_path / "env"
    if step is None:
        shutil.copytree(ECHO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        folder.mkdir()
        (folder / "Dockerfile").write_text(
            f"ARG BASE_IMAGE=python:3.11-slim\nFROM ${{BASE_IMAGE}}\nRUN {step} # {run}\n"
        )
    on = settings.model_copy(
        update={"builder": "container", "image_prefix": IMAGE_PREFIX, "reproducible_build_check": True}
    )
    built = ContainerBuilder().build(on, folder, "alice", "twice", run, lambda line: None)
    result = build_results(built)[1]
    assert result.check_id == "static.reproducible_build" and result.status == status, result
    client = engine().client()
    assert not client.images.list(name=f"{built.image_ref}-rebuild")  # the copy is gone
    if status == "fail":
        assert result.measured["paths"] == ["made"] and run in str(result.measured["step"]), result
        assert "SOURCE_DATE_EPOCH" in str(result.remediation)
    else:
        assert "timestamps aside" in result.evidence[0] or "bit for bit" in result.evidence[0]
    client.images.remove(str(built.image_ref), force=True)
    off = ContainerBuilder().build(
        settings.model_copy(update={"builder": "container", "image_prefix": IMAGE_PREFIX}),
        folder,
        "alice",
        "twice",
        run,
        lambda line: None,
    )
    assert (
        build_results(off)[1].status == "skip"
        and "reproducible_build_check is off" in build_results(off)[1].evidence[0]
    )
    client.images.remove(str(off.image_ref), force=True)


def test_the_oracle_search_stops_at_its_budget(tmp_path: Path) -> None:
    """A container filled with files is looked through up to a budget of entries, then given up
    (oracle_containment then skips: a search cut short proves nothing)."""
    from hub_service.pipeline.rfc008_container import _files_of_size

    for i in range(50):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "answer.json").write_text("x" * 7)
    everything = list(_files_of_size(tmp_path, "", 7, [10_000]))
    assert len(everything) == 50
    budget = [20]
    cut = list(_files_of_size(tmp_path, "", 7, budget))
    assert len(cut) < 50 and budget[0] <= 0
