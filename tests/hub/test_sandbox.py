"""Untrusted code in the pipeline: a hostile Space is contained and reported, and no secret of the
service reaches a build, a container or a log."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from hub_service.catalog.models import EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import FetchRefused, LocalSource, check_tree
from hub_service.sandbox import smoke_process_cap
from hub_service.worker import Worker
from tests.support.servers import ROOT
from tests.support.systems import require_runsc, require_system, use_podman

pytestmark = [pytest.mark.docker, pytest.mark.slow]
HOSTILE = ROOT / "tests" / "hub" / "envs" / "hostile"


def probes(smoke_log: str) -> dict[str, str]:
    return dict(re.findall(r"server\| PROBE (\S+) (.*)", smoke_log))


@pytest.mark.parametrize(("engine_kind", "runtime"), [("docker", "runc"), ("docker", "runsc"), ("podman", "runc")])
def test_hostile_space_is_contained_and_secrets_never_leak(
    clean_factory, hub_settings, monkeypatch, tmp_path: Path, engine_kind: str, runtime: str
) -> None:
    """The whole pipeline on a hostile env, on each engine and runtime (Podman picks its runtime
    in its service's set-up, not per container: scripts/podman-engine)."""
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    if runtime == "runsc":
        require_runsc()
    if engine_kind == "podman":
        use_podman(monkeypatch)
    marker = f"sekret{uuid.uuid4().hex}"
    secrets = {f"hf_{marker}", f"maint_{marker}", f"webhook_{marker}", f"sk-{marker}"}
    monkeypatch.setenv("HF_TOKEN", f"hf_{marker}")
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-{marker}")
    monkeypatch.setenv("OPENENV_HUB_WEBHOOK_SECRET", f"webhook_{marker}")
    db_url = hub_settings.database_url
    if db_url.startswith("postgresql"):
        db_url += ("&" if "?" in db_url else "?") + f"application_name=db_{marker}"
        secrets.add(f"db_{marker}")
    settings = hub_settings.model_copy(
        update={
            "builder": "container",
            "hf_token": SecretStr(f"hf_{marker}"),
            "maintainer_token": SecretStr(f"maint_{marker}"),
            "database_url": db_url,
            "smoke_timeout_s": 120.0,
            "sandbox_runtime": runtime,
        }
    )
    root = Path(settings.local_source)
    root.mkdir(parents=True)
    shutil.copytree(HOSTILE, root / "hostile", ignore=shutil.ignore_patterns("__pycache__"))
    index_source(clean_factory, LocalSource(root, trusted=False))
    verdicts = Worker(settings, clean_factory).run_until_idle()
    with clean_factory() as s:
        version = s.scalar(select(EnvVersion))
        logs = {r.stage: r.log for r in s.scalars(select(StageRun))}
    assert verdicts == ["passed"], logs.get("smoke", logs)
    found = probes(logs["smoke"])
    # The runtime, seen on the host (the stage log) and from inside the container (its kernel).
    host_kernel = Path("/proc/version").read_text().strip()
    if runtime == "runsc":
        assert "container runtime: runsc (gVisor's kernel; its first process on this host" in logs["smoke"]
        assert found["kernel-log"].endswith("Starting gVisor..."), found  # gVisor's own kernel log
        assert found["kernel"] != host_kernel, found
    else:
        assert "container runtime: runc (the host's kernel;" in logs["smoke"]
        assert found["kernel"] == host_kernel, found
        # The host's log is not the container's to read where the kernel restricts it (Debian's default).
        if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1":
            assert found["kernel-log"] == "blocked-EPERM", found
    # Contained: no way out, no host, no disk filling, no fork bomb.
    assert found["outside-ip"].startswith("blocked"), found
    assert found["outside-dns"] == "blocked", found
    assert found["host-gateway"] == "blocked-timeout", found  # new connections to the host are dropped
    assert re.search(r"EROFS|EACCES", found["disk/fill.bin"]), found  # the root is read-only (and not ours)
    stopped = re.match(r"stopped-at-(\d+)MB-(ENOSPC|EFBIG)", found["disk/tmp/fill.bin"])
    assert stopped and int(stopped.group(1)) <= settings.smoke_tmpfs_mb, found
    fork = re.match(r"stopped-at-(\d+)-EAGAIN", found["forkbomb"])
    assert fork and int(fork.group(1)) < smoke_process_cap(settings), found
    # Reported: the probes are in the smoke log the API serves.
    assert "PROBE forkbomb" in logs["smoke"]

    # Never leaked: not in the container's environment, not in any log, not in the image.
    from openenv.engines import engine

    image = engine().client().images.get(version.image_ref)
    places = {
        "container environ": found["environ"] + found.get("pid1-environ", ""),
        **{f"{stage} log": text for stage, text in logs.items()},
        "report": json.dumps(version.validation),
        "image config": json.dumps(image.attrs),
        "image history": json.dumps(image.history()),
    }
    for place, text in places.items():
        for secret in secrets:
            assert secret not in text, f"{secret} leaked into the {place}"


def test_fetched_trees_drop_links_out_and_respect_the_size_cap(tmp_path: Path) -> None:
    tree = tmp_path / "env"
    tree.mkdir()
    (tree / "ok.txt").write_text("fine")
    (tree / "inside").symlink_to(tree / "ok.txt")
    (tree / "shadow").symlink_to("/etc/shadow")
    (tree / "up").symlink_to("../..")
    check_tree(tree, 1 << 20)
    assert sorted(p.name for p in tree.iterdir()) == ["inside", "ok.txt"]
    (tree / "big.bin").write_bytes(b"\0" * (2 << 20))
    with pytest.raises(FetchRefused, match="cap of 1 MB"):
        check_tree(tree, 1 << 20)


def test_local_source_never_copies_what_a_link_points_at(tmp_path: Path) -> None:
    root = tmp_path / "envs"
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    secret = tmp_path / "host-secret.txt"
    secret.write_text("do not copy me")
    (root / "echo_env" / "leak.txt").symlink_to(secret)
    source = LocalSource(root)
    [item] = list(source.list())
    fetched = source.fetch("local", "echo_env", item.sha, tmp_path / "fetched")
    assert not (fetched / "leak.txt").exists()
    assert all("do not copy me" not in p.read_text(errors="ignore") for p in fetched.rglob("*") if p.is_file())


def test_a_runtime_the_engine_lacks_makes_the_smoke_test_wait_not_fail(hub_settings, tmp_path: Path) -> None:
    """The operator's set-up, not the env: no container starts, and the stage waits (Transient)."""
    from hub_service.pipeline.builders import BuildOutput
    from hub_service.pipeline.stages import smoke
    from hub_service.queue.errors import Transient

    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # no engine, no SDK
        require_system("Docker", f"no engine answers ({exc})")
    settings = hub_settings.model_copy(update={"sandbox_runtime": "no-such-runtime"})
    built = BuildOutput(builder="container", image_ref="openenv-test/never-started:1")
    with pytest.raises(Transient) as caught:
        smoke(settings, built, tmp_path, lambda line: None)
    assert caught.value.code == Transient.HOST_SETUP
    assert "the container engine has no runtime 'no-such-runtime' (it has " in str(caught.value)
    assert "the smoke test waits for it" in str(caught.value)


def test_play_sessions_get_the_sandbox_runtime_and_limits_of_smoke_tests(hub_settings) -> None:
    """Play sessions start through the same `confined_provider` as smoke tests: the runtime setting
    and, under gVisor, the process cap held to the memory limit reach them too."""
    from hub_service.sandbox import confined_provider, smoke_process_cap

    settings = hub_settings.model_copy(
        update={"sandbox_runtime": "runsc", "smoke_memory": "512m", "smoke_isolated_network": False}
    )
    provider = confined_provider(settings, "openenv-test/never-run:1", startup_timeout_s=5)
    assert provider.runtime == "runsc"
    nproc = [u for u in provider.run_options["ulimits"] if u["Name"] == "nproc"]
    assert smoke_process_cap(settings) == 16 and [(u["Soft"], u["Hard"]) for u in nproc] == [(16, 16)]
    assert provider.run_options["pids_limit"] == 16 * 32
    runc = confined_provider(
        settings.model_copy(update={"sandbox_runtime": "runc"}), "openenv-test/never-run:1", startup_timeout_s=5
    )
    assert runc.runtime == "runc" and runc.run_options["pids_limit"] == settings.smoke_pids
    assert not [u for u in runc.run_options["ulimits"] if u["Name"] == "nproc"]  # per host uid under runc: not set


def _seen_as(gvisor: bool | None, evidence: str) -> Any:
    """What `verify_runtime` uses of a ContainerProvider: its observation and its stop."""
    from openenv.engines.runtimes import ObservedRuntime

    class Provider:
        stopped = False

        def observed_runtime(self) -> ObservedRuntime:
            return ObservedRuntime("runsc", gvisor, evidence)

        def stop(self) -> None:
            self.stopped = True

    return Provider()


def test_a_container_meant_for_gvisor_on_the_host_kernel_is_stopped_and_the_test_waits(hub_settings) -> None:
    """What the host saw overrules what the engine claimed: the smoke test does not go on."""
    import asyncio

    from hub_service.pipeline.stages import _check_runtime
    from hub_service.queue.errors import Transient

    provider, lines = _seen_as(False, "its first process on this host, pid 42, is the image's own program"), []
    settings = hub_settings.model_copy(update={"sandbox_runtime": "runsc"})
    with pytest.raises(Transient) as caught:
        asyncio.run(_check_runtime(settings, provider, lines.append))
    assert provider.stopped and caught.value.code == Transient.HOST_SETUP
    assert "told to run the container under gVisor (runsc) but it runs on the host's kernel" in str(caught.value)
    assert lines == [
        "container runtime: runsc (the host's kernel; its first process on this host, pid 42, is the image's own program)"
    ]


def test_a_container_meant_for_gvisor_that_the_host_cannot_see_is_stopped_too(hub_settings) -> None:
    """Fail closed: the engine's word alone (a remote engine, a Hub not root) is no evidence of
    gVisor, in a smoke test or a play session; the wait says how to fix the host."""
    import asyncio

    from hub_service.pipeline.stages import _check_runtime
    from hub_service.queue.errors import Transient
    from hub_service.sandbox import RuntimeUnverified, verify_runtime

    settings = hub_settings.model_copy(update={"sandbox_runtime": "runsc"})
    unseen = "process 42 is not visible here; the engine's word is all there is"
    provider = _seen_as(None, unseen)
    with pytest.raises(Transient) as caught:
        asyncio.run(_check_runtime(settings, provider, lambda line: None))
    assert provider.stopped and caught.value.code == Transient.HOST_SETUP
    assert "cannot verify the runtime" in str(caught.value) and "run the Hub's workers as root" in str(caught.value)
    seen = _seen_as(True, "its first process on this host, pid 42, is /usr/bin/runsc")
    verify_runtime(settings, seen, lambda line: None)
    assert not seen.stopped
    # Under runc there is nothing to prove: the container runs on the host's kernel by design.
    runc = _seen_as(None, unseen)
    verify_runtime(settings.model_copy(update={"sandbox_runtime": "runc"}), runc, lambda line: None)
    assert not runc.stopped
    with pytest.raises(RuntimeUnverified):
        verify_runtime(settings, _seen_as(None, unseen), lambda line: None)


def test_under_gvisor_the_process_cap_follows_the_memory_the_env_was_granted(hub_settings) -> None:
    """An env granted less memory than the Hub's default gets a process cap to match (gVisor
    holds memory per process): the cap is not the default memory's."""
    from hub_service.sandbox import grant, smoke_process_cap
    from openenv.declared import read_declared

    settings = hub_settings.model_copy(update={"sandbox_runtime": "runsc", "smoke_memory": "1g"})
    declared = read_declared({"validation": {"resources": {"cpu": 1, "memory_mb": 320}}})
    overrides, _ = grant(settings, declared)
    nproc = [(u["Soft"], u["Hard"]) for u in overrides["ulimits"] if u["Name"] == "nproc"]
    assert smoke_process_cap(settings) == 32 and nproc == [(10, 10)]  # 320 MB / 32 MB a process
    assert overrides["pids_limit"] == 10 * 32 and overrides["mem_limit"] == "320m"
    assert {u["Name"] for u in overrides["ulimits"]} == {"fsize", "nofile", "nproc"}  # the others kept


def test_a_play_session_whose_sandbox_cannot_be_verified_never_reaches_the_visitor(hub_settings) -> None:
    """Play sessions are checked like smoke tests: a container meant for gVisor that the host cannot
    see is stopped before anyone plays it, and the visitor hears it is the Hub's set-up."""
    import asyncio

    from hub_service.play.errors import PlayStartError
    from hub_service.play.instances import InstancePool, Target
    from hub_service.sandbox import verify_runtime

    settings = hub_settings.model_copy(update={"sandbox_runtime": "runsc"})
    provider = _seen_as(None, "process 42 is not visible here; the engine's word is all there is")
    stopped: list[bool] = []

    async def astart() -> str:
        return "http://127.0.0.1:1"

    async def astop() -> None:
        stopped.append(True)

    provider.astart, provider.astop = astart, astop
    target = Target(
        key="local/echo_env@1",
        how="docker",
        make_provider=lambda: provider,
        check_started=lambda p: verify_runtime(settings, p, lambda line: None),
    )

    async def play() -> None:
        pool = InstancePool(max_instances=2, linger_s=0)
        with pytest.raises(PlayStartError) as caught:
            await pool.acquire(target)
        assert "its sandbox could not be verified" in str(caught.value) and "127.0.0.1" not in str(caught.value)
        assert not pool.instances  # nothing left for the next visitor to be handed

    asyncio.run(play())
    assert provider.stopped and stopped
