"""ContainerProvider: real containers of the echo image, on 127.0.0.1, labelled, removed on stop."""

from __future__ import annotations

import time

import pytest
from echo_env import EchoAction, EchoEnv

from openenv.client.providers import ContainerProvider, lifecycle
from openenv.errors import EnvDisconnectedError, ProviderStartError
from tests.providers.conftest import ECHO_DIR, RUN_LABEL

pytestmark = pytest.mark.docker


def _exists(engine, cid: str) -> bool:
    return bool(engine.api.containers(all=True, filters={"id": cid}))


async def test_container_on_loopback_with_labels_removed_on_stop(echo_image: str, docker_engine) -> None:
    provider = ContainerProvider(echo_image, env={"OPENENV_MAX_SESSIONS": "7"})
    url = await provider.astart()
    cid = provider.container_id
    try:
        info = docker_engine.api.inspect_container(cid)
        bindings = info["NetworkSettings"]["Ports"]["8000/tcp"]
        assert {b["HostIp"] for b in bindings} == {"127.0.0.1"}  # never on all interfaces
        labels = info["Config"]["Labels"]
        assert labels[lifecycle.LABEL_MANAGED] == lifecycle.MANAGED_VALUE
        assert labels[lifecycle.LABEL_OWNER] == lifecycle.this_owner()
        assert labels[RUN_LABEL[0]] == RUN_LABEL[1]
        assert info["Name"].startswith("/providers-test-echo_env-")
        async with EchoEnv(url) as env:
            assert (await env.step(EchoAction(message="hey"))).observation.echoed_message == "hey"
        listed = lifecycle.list_running(labels=dict([RUN_LABEL]))
        assert [(i.kind, i.id, i.url, i.orphaned) for i in listed] == [("container", cid[:12], url, False)]
        assert "Uvicorn running" in provider.logs() or "startup complete" in provider.logs()
    finally:
        await provider.astop()
    assert not _exists(docker_engine, cid)


async def test_from_docker_image_and_close_removes_the_container(echo_image: str, docker_engine) -> None:
    env = await EchoEnv.from_docker_image(echo_image)
    cid = env.provider.container_id
    result = await env.reset()
    assert result.observation.echoed_message == "Echo environment ready!"
    await env.close()
    assert not _exists(docker_engine, cid)


def test_from_docker_image_sync_and_upstream_env_vars_name(echo_image: str, docker_engine) -> None:
    with EchoEnv.from_docker_image(echo_image, env_vars={"OPENENV_MAX_SESSIONS": "3"}).sync() as env:
        cid = env.provider.container_id
        env_list = docker_engine.api.inspect_container(cid)["Config"]["Env"]
        assert "OPENENV_MAX_SESSIONS=3" in env_list
        assert env.step(EchoAction(message="ab")).reward == pytest.approx(0.2)
    assert not _exists(docker_engine, cid)


async def test_container_killed_mid_episode_is_a_clear_error(echo_image: str, docker_engine) -> None:
    env = await EchoEnv.from_docker_image(echo_image, message_timeout_s=60)
    try:
        await env.reset()
        docker_engine.api.kill(env.provider.container_id)
        started = time.monotonic()
        with pytest.raises(EnvDisconnectedError):
            await env.step(EchoAction(message="anyone?"))
        assert time.monotonic() - started < 5
        assert "exit code 137" in env.provider.exit_reason()
    finally:
        await env.close()


async def test_container_that_exits_fails_the_start_with_its_logs(echo_image: str) -> None:
    provider = ContainerProvider(echo_image, env={"OPENENV_MAX_SESSIONS": "zero"}, startup_timeout_s=60)
    started = time.monotonic()
    with pytest.raises(ProviderStartError) as info:
        await provider.astart()
    assert time.monotonic() - started < 20
    assert "OPENENV_MAX_SESSIONS='zero' is not a valid" in str(info.value)
    assert "exit code" in str(info.value)
    assert lifecycle.list_running(labels=dict([RUN_LABEL])) == []


async def test_missing_image_is_a_clear_error(docker_engine) -> None:
    with pytest.raises(ProviderStartError, match=r"is not here .*pull='never'.*build it first"):
        await ContainerProvider("providers-test/no-such-image:1", pull="never").astart()


def test_from_env_dir_builds_with_the_local_sdk(base_image: str, docker_engine) -> None:
    provider = ContainerProvider.from_env_dir(
        ECHO_DIR, tag="providers-test/echo_env:from-env-dir", base_image=base_image
    )
    try:
        image = docker_engine.api.inspect_image(provider.image)
        assert image["Config"]["Labels"]["org.openenv.built-by"] == "openenv"
        with EchoEnv(provider.start()).sync() as env:
            assert env.reset().observation.echoed_message == "Echo environment ready!"
    finally:
        provider.stop()


async def test_host_network_binds_loopback_only(echo_image: str, docker_engine) -> None:
    provider = ContainerProvider(echo_image, network="host")
    url = await provider.astart()
    try:
        info = docker_engine.api.inspect_container(provider.container_id)
        assert info["HostConfig"]["NetworkMode"] == "host"
        assert "HOST=127.0.0.1" in info["Config"]["Env"]
        assert url.startswith("http://127.0.0.1:")
        async with EchoEnv(url) as env:
            assert (await env.reset()).observation.echoed_message == "Echo environment ready!"
    finally:
        await provider.astop()
