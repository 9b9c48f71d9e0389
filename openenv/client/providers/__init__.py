"""Where env servers run: local processes, containers, swarm services, Kubernetes.

Every provider has the same small interface (`Provider`): `start()` / `await astart()` returns
the base URL once `GET /health` answers 200, `stop()` / `await astop()` removes what was
started, `logs()` returns its output, `exit_reason()` says why it is gone. Engines are imported
only when a provider is used (the `docker` extra for Docker and Swarm, `kubernetes` for K8s, `ray` for Ray actors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv._lazy import lazy_attributes

__all__ = ["DockerProvider", "KubernetesProvider", "ProcessProvider", "Provider", "RayProvider", "SwarmProvider"]

_LAZY = {
    "Provider": "openenv.client.providers.base",
    "ProcessProvider": "openenv.client.providers.process",
    "DockerProvider": "openenv.client.providers.docker",
    "SwarmProvider": "openenv.client.providers.swarm",
    "KubernetesProvider": "openenv.client.providers.kubernetes",
    "RayProvider": "openenv.client.providers.ray",
}


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)

if TYPE_CHECKING:
    from openenv.client.providers.base import Provider
    from openenv.client.providers.docker import DockerProvider
    from openenv.client.providers.kubernetes import KubernetesProvider
    from openenv.client.providers.process import ProcessProvider
    from openenv.client.providers.ray import RayProvider
    from openenv.client.providers.swarm import SwarmProvider
