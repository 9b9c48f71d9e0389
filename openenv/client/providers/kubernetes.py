"""`KubernetesProvider`: an env image as a Deployment plus a Service, with the official client.

    provider = KubernetesProvider("registry.example/echo-env:1.0", replicas=4, namespace="rl")
    url = provider.start()       # http://<name>.rl.svc.cluster.local:8000 (the client runs in-cluster)

The Service balances connections over the replicas, and a WebSocket session stays on the pod it
connected to. Pods get a readiness probe on `/health`, so the Service only routes to ready
replicas. Owner, start time and env are annotations (label values cannot hold them); the
`app.kubernetes.io/managed-by=openenv-client` label selects everything clients started.

Not run in this project's CI (no cluster here): its tests check the exact objects it creates.
Needs the `kubernetes` extra and a kubeconfig or in-cluster service account.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from openenv.client import _settings
from openenv.client.providers import lifecycle
from openenv.client.providers.base import Provider
from openenv.errors import ConfigurationError, ProviderStartError, ProviderUnavailableError

__all__ = ["KubernetesProvider"]

MANAGED_BY = "app.kubernetes.io/managed-by"
INSTANCE = "app.kubernetes.io/instance"
NAME = "app.kubernetes.io/name"


def _dns_name(image: str) -> str:
    base = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0].lower()
    base = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:40] or "env"
    return f"{_settings.name_prefix().lower()}-{base}-{uuid.uuid4().hex[:8]}"


class KubernetesProvider(Provider):
    """Run an env image as a Kubernetes Deployment behind a Service.

    Args:
        image: the image reference (pullable by the cluster).
        replicas: how many pods.
        namespace: where to create the objects.
        port: the port the server listens on in the container (and the Service's port).
        env: environment variables of the container.
        resources: the container's `resources` (e.g. `{"limits": {"cpu": "1", "memory": "1Gi"}}`).
        base_url: where the client reaches the Service (default: its cluster DNS name, for
            clients that run inside the cluster; pass a port-forward or ingress URL otherwise).
        image_pull_policy: the container's imagePullPolicy.
        api_client: a `kubernetes.client.ApiClient` (default: kubeconfig, then in-cluster config).
        **kwargs: `Provider` options (startup_timeout_s, stop_timeout_s, labels, name).
    """

    kind = "kubernetes"
    name: str  # never None here: __init__ derives one from the image when none is given

    def __init__(
        self,
        image: str,
        *,
        replicas: int = 1,
        namespace: str = "default",
        port: int = 8000,
        env: dict[str, str] | None = None,
        resources: dict[str, Any] | None = None,
        base_url: str | None = None,
        image_pull_policy: str = "IfNotPresent",
        api_client: Any = None,
        **kwargs: Any,
    ) -> None:
        if replicas < 1:
            raise ConfigurationError("replicas must be >= 1")
        name = kwargs.pop("name", None) or _dns_name(image)
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
            raise ConfigurationError(
                f"name {name!r} is not a valid Kubernetes name (lower case, digits and '-', at most 63)"
            )
        super().__init__(name=name, **kwargs)
        self.image = image
        self.replicas = replicas
        self.namespace = namespace
        self.port = port
        self.env = dict(env or {})
        self.resources = resources
        self.url = base_url or f"http://{name}.{namespace}.svc.cluster.local:{port}"
        self.image_pull_policy = image_pull_policy
        self._api_client = api_client
        self._created = False

    # -- the objects ----------------------------------------------------------------------------

    def selector(self) -> dict[str, str]:
        return {INSTANCE: self.name}

    def object_labels(self) -> dict[str, str]:
        wanted = {**_settings.extra_labels(), **self.labels}
        extra = {k: v for k, v in wanted.items() if _valid_label_value(v)}
        return {NAME: "openenv-env", MANAGED_BY: lifecycle.MANAGED_VALUE, **self.selector(), **extra}

    def annotations(self) -> dict[str, str]:
        return {
            k: v for k, v in lifecycle.owner_labels(self.image, self.labels).items() if k.startswith("org.openenv.")
        }

    def build_objects(self) -> tuple[Any, Any]:
        """The Deployment and Service this provider creates (kubernetes.client models)."""
        from kubernetes import client as k8s

        labels, annotations = self.object_labels(), self.annotations()
        probe = k8s.V1Probe(
            http_get=k8s.V1HTTPGetAction(path="/health", port="http"),
            period_seconds=1,
            timeout_seconds=2,
            failure_threshold=3,
        )
        container = k8s.V1Container(
            name="env",
            image=self.image,
            image_pull_policy=self.image_pull_policy,
            ports=[k8s.V1ContainerPort(container_port=self.port, name="http", protocol="TCP")],
            env=[k8s.V1EnvVar(name=k, value=v) for k, v in sorted(self.env.items())] or None,
            readiness_probe=probe,
            resources=k8s.V1ResourceRequirements(**self.resources) if self.resources else None,
        )
        deployment = k8s.V1Deployment(
            api_version="apps/v1",
            kind="Deployment",
            metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace, labels=labels, annotations=annotations),
            spec=k8s.V1DeploymentSpec(
                replicas=self.replicas,
                selector=k8s.V1LabelSelector(match_labels=self.selector()),
                template=k8s.V1PodTemplateSpec(
                    metadata=k8s.V1ObjectMeta(labels=labels, annotations=annotations),
                    spec=k8s.V1PodSpec(
                        containers=[container], termination_grace_period_seconds=int(self.stop_timeout_s)
                    ),
                ),
            ),
        )
        service = k8s.V1Service(
            api_version="v1",
            kind="Service",
            metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace, labels=labels, annotations=annotations),
            spec=k8s.V1ServiceSpec(
                selector=self.selector(),
                type="ClusterIP",
                ports=[k8s.V1ServicePort(name="http", port=self.port, target_port="http", protocol="TCP")],
            ),
        )
        return deployment, service

    # -- the cluster ----------------------------------------------------------------------------

    def _apis(self) -> tuple[Any, Any]:
        try:
            from kubernetes import client as k8s
            from kubernetes import config
        except ImportError as exc:
            raise ProviderUnavailableError(
                "KubernetesProvider needs the kubernetes client: pip install 'openenv-hub[kubernetes]'"
            ) from exc
        if self._api_client is None:
            try:
                config.load_kube_config()
            except Exception:  # no kubeconfig: try the pod's service account before giving up
                try:
                    config.load_incluster_config()
                except config.ConfigException as exc:
                    raise ProviderUnavailableError(
                        f"no Kubernetes cluster configured ({exc}); set KUBECONFIG or run in a pod"
                    ) from exc
            self._api_client = k8s.ApiClient()
        return k8s.AppsV1Api(self._api_client), k8s.CoreV1Api(self._api_client)

    def _launch(self) -> list[str]:
        from kubernetes.client.exceptions import ApiException

        apps, core = self._apis()
        deployment, service = self.build_objects()
        try:
            apps.create_namespaced_deployment(self.namespace, deployment)
            self._created = True
            core.create_namespaced_service(self.namespace, service)
        except ApiException as exc:
            raise ProviderStartError(
                f"the cluster refused {self.name}: {exc.status} {exc.reason}: {exc.body}"
            ) from None
        deadline = time.monotonic() + self.startup_timeout_s
        delay = 0.1
        while True:
            status = apps.read_namespaced_deployment_status(self.name, self.namespace).status
            if (status.ready_replicas or 0) >= self.replicas:
                return [self.url]
            if time.monotonic() > deadline:
                raise ProviderStartError(
                    f"{self.name}: {status.ready_replicas or 0}/{self.replicas} pods ready after {self.startup_timeout_s:g}s"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _terminate(self) -> None:
        if not self._created:
            return
        from kubernetes.client import V1DeleteOptions
        from kubernetes.client.exceptions import ApiException

        apps, core = self._apis()
        options = V1DeleteOptions(propagation_policy="Foreground", grace_period_seconds=int(self.stop_timeout_s))
        for delete in (core.delete_namespaced_service, apps.delete_namespaced_deployment):
            try:
                delete(self.name, self.namespace, body=options)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self._created = False

    def exit_reason(self) -> str | None:
        if not self._created:
            return "not started"
        from kubernetes.client.exceptions import ApiException

        apps, _ = self._apis()
        try:
            apps.read_namespaced_deployment(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return f"deployment {self.name} was deleted"
            raise
        return None

    def logs(self, tail: int = 200) -> str:
        if not self._created:
            return ""
        _, core = self._apis()
        selector = ",".join(f"{k}={v}" for k, v in self.selector().items())
        parts = []
        for pod in core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            text = core.read_namespaced_pod_log(pod.metadata.name, self.namespace, tail_lines=tail)
            parts.append(f"--- {pod.metadata.name} ---\n{text}")
        return "\n".join(parts)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "image": self.image, "namespace": self.namespace, "replicas": self.replicas}


def _valid_label_value(value: str) -> bool:
    return bool(re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", value))
