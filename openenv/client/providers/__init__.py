"""Where env servers run: local processes, containers, swarm services, Kubernetes.

Every provider has the same small interface (`Provider`): `start()` / `await astart()` returns
the base URL once `GET /health` answers 200, `stop()` / `await astop()` removes what was
started, `logs()` returns its output, `exit_reason()` says why it is gone. Engines are imported
only when a provider is used (the `docker` extra for containers on Docker or Podman and for Swarm,
`kubernetes` for K8s, `ray` for Ray actors). `DockerProvider` is the deprecated old name of
`ContainerProvider` (it warns; it goes in the next release).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv._lazy import lazy_attributes

__all__ = ["ContainerProvider", "KubernetesProvider", "ProcessProvider", "Provider", "RayProvider", "SwarmProvider"]

_LAZY = {
    "Provider": "openenv.client.providers.base",
    "ProcessProvider": "openenv.client.providers.process",
    "ContainerProvider": "openenv.client.providers.container",
    "SwarmProvider": "openenv.client.providers.swarm",
    "KubernetesProvider": "openenv.client.providers.kubernetes",
    "RayProvider": "openenv.client.providers.ray",
}


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY, deprecated={"DockerProvider": "ContainerProvider"})

if TYPE_CHECKING:
    from openenv.client.providers.base import Provider
    from openenv.client.providers.container import ContainerProvider
    from openenv.client.providers.kubernetes import KubernetesProvider
    from openenv.client.providers.process import ProcessProvider
    from openenv.client.providers.ray import RayProvider
    from openenv.client.providers.swarm import SwarmProvider
