"""`RayProvider(image=...)`: env servers as containers, each started by its Ray actor on its actor's
node, on the real 3-node cluster; and what becomes of a container when its node dies.

The three nodes share this machine's Docker engine, so a killed node's container outlives it (on
separate machines it goes with its machine): the pool replaces the server on a surviving node, and
the orphan, whose owner process is gone, is what `openenv gc` removes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from openenv.client.pool import EnvPool
from openenv.client.providers import lifecycle
from tests.envs.images import EnvImages, docker_client
from tests.ray.conftest import RayCluster
from tests.ray.test_ray_pool import answers, wait_until

NODE_LABEL = "org.openenv.ray-node"


def _containers(client: Any, image: str) -> dict[str, Any]:
    """The running containers of `image` that Ray actors started, by the node each is on."""
    found = client.containers.list(filters={"label": NODE_LABEL, "ancestor": image})
    return {c.labels[NODE_LABEL]: c for c in found}


async def test_image_servers_run_on_their_nodes_and_a_dead_node_is_replaced(
    ray_cluster: RayCluster, env_images: EnvImages
) -> None:
    image = env_images.tag("blackjack_env")
    client = docker_client()
    async with EnvPool.ray(image=image, size=2, health_interval_s=0.2) as pool:
        nodes = {pool.node_of(u) for u in pool.urls}
        assert len(nodes) == 2 and nodes <= ray_cluster.node_ids()  # spread: one server per node
        running = _containers(client, image)
        assert set(running) == nodes, (running, nodes)  # each container labelled with its actor's node
        for container in running.values():
            assert container.labels[lifecycle.LABEL_MANAGED] == lifecycle.MANAGED_VALUE

        async with pool.session() as env:  # a whole episode through a container's server
            result = await env.reset(seed=3)
            while not result.done:
                result = await env.step({"action": "stand"})
            assert result.reward is not None

        by_id = {n.node_id: n for n in ray_cluster.workers}
        doomed_url = next(u for u in pool.urls if pool.node_of(u) in by_id)
        doomed = pool.node_of(doomed_url)
        ray_cluster.kill_node(ray_cluster.pids_of(by_id[doomed]))
        await asyncio.to_thread(ray_cluster.cluster.remove_node, by_id[doomed], False)

        assert await wait_until(lambda: pool.replacements >= 1 and len(pool.urls) == 2, 90), pool
        survivors = {pool.node_of(u) for u in pool.urls}
        assert doomed not in survivors and len(survivors) == 2  # the replacement runs on the third node
        async with pool.session() as env:
            assert (await env.reset(seed=3)).observation["player_total"] > 0

        # The dead node's container: its owner (the killed actor) is gone, so it is an orphan that
        # `openenv gc` removes, and only it: the live servers stay.
        orphans = [i for i in lifecycle.list_running(labels={NODE_LABEL: doomed}) if i.orphaned]
        assert len(orphans) == 1, lifecycle.list_running(labels={NODE_LABEL: doomed})
        removed = lifecycle.gc(labels={NODE_LABEL: doomed})
        assert [i.id for i in removed] == [orphans[0].id]
        assert await wait_until(lambda: not answers(doomed_url), 10), "the orphan still serves after gc"
        assert set(_containers(client, image)) == survivors
        urls = list(pool.urls)

    deadline = time.monotonic() + 30
    while _containers(client, image) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert _containers(client, image) == {}, "containers left after the pool closed"
    for url in urls:
        assert not answers(url)
