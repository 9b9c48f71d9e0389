"""SwarmProvider on a single-node swarm (made by the `swarm` fixture on 127.0.0.1)."""

from __future__ import annotations

import pytest
from echo_env import EchoAction, EchoEnv

from openenv.client.pool import EnvPool
from openenv.client.providers import SwarmProvider, lifecycle
from openenv.client.providers.swarm import swarm_active
from openenv.errors import ProviderUnavailableError
from tests.providers.conftest import RUN_LABEL, leave_a_killed_runs_swarm

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_without_a_swarm_the_error_says_what_to_do(docker_engine, echo_image: str) -> None:
    # First in this module, before the `swarm` fixture makes one.
    leave_a_killed_runs_swarm(docker_engine)
    if swarm_active(docker_engine):
        pytest.skip("the engine is already a swarm manager (the message is only given without one)")
    with pytest.raises(ProviderUnavailableError, match="docker swarm init"):
        SwarmProvider(echo_image).start()


async def test_replicated_service_one_url_per_replica(swarm, echo_image: str) -> None:
    provider = SwarmProvider(echo_image, replicas=3)
    await provider.astart()
    sid = provider.service_id
    try:
        assert len(set(provider.base_urls)) == 3
        assert all(u.startswith("http://127.0.0.1:") for u in provider.base_urls)
        episodes = set()
        for url in provider.base_urls:
            async with EchoEnv(url) as env:
                await env.reset()
                assert (await env.step(EchoAction(message="hi"))).observation.echoed_message == "hi"
                episodes.add((await env.state()).episode_id)
        assert len(episodes) == 3
        listed = lifecycle.list_running(labels=dict([RUN_LABEL]))
        assert [(i.kind, i.name) for i in listed] == [("service", provider.name)]  # its tasks are not listed twice
        assert provider.exit_reason() is None
    finally:
        await provider.astop()
    assert not swarm.api.services(filters={"id": sid})
    assert not swarm.api.containers(all=True, filters={"label": f"com.docker.swarm.service.id={sid}"})


async def test_pool_over_swarm_replicas(swarm, echo_image: str) -> None:
    async with EnvPool([SwarmProvider(echo_image, replicas=2)], client_cls=EchoEnv) as pool:
        assert len(pool.urls) == 2
        async with pool.session() as a, pool.session() as b:
            assert a.base_url != b.base_url  # balanced over the replicas
            await a.reset()
            await b.reset()
