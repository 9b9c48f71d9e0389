"""KubernetesProvider: the exact objects it creates (no cluster runs here; see its docstring)."""

from __future__ import annotations

import pytest

from openenv.client.providers import KubernetesProvider, lifecycle
from openenv.errors import ConfigurationError
from tests.providers.conftest import RUN_LABEL, RUN_SET_LABEL

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes extra is not installed")


def test_deployment_and_service() -> None:
    from kubernetes.client import ApiClient

    provider = KubernetesProvider(
        "registry.example/echo-env:1.0",
        replicas=4,
        namespace="rl",
        name="echo-a1",
        env={"OPENENV_MAX_SESSIONS": "64"},
        resources={"limits": {"cpu": "1", "memory": "1Gi"}},
        stop_timeout_s=7,
    )
    deployment, service = (ApiClient().sanitize_for_serialization(o) for o in provider.build_objects())
    labels = {
        "app.kubernetes.io/name": "openenv-env",
        "app.kubernetes.io/managed-by": "openenv-client",
        "app.kubernetes.io/instance": "echo-a1",
        RUN_LABEL[0]: RUN_LABEL[1],
        RUN_SET_LABEL[0]: RUN_SET_LABEL[1],
    }
    annotations = deployment["metadata"]["annotations"]
    assert annotations[lifecycle.LABEL_OWNER] == lifecycle.this_owner()
    assert annotations[lifecycle.LABEL_ENV] == "registry.example/echo-env:1.0"
    assert deployment == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "echo-a1", "namespace": "rl", "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": "echo-a1"}},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "terminationGracePeriodSeconds": 7,
                    "containers": [
                        {
                            "name": "env",
                            "image": "registry.example/echo-env:1.0",
                            "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
                            "env": [{"name": "OPENENV_MAX_SESSIONS", "value": "64"}],
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": "http"},
                                "periodSeconds": 1,
                                "timeoutSeconds": 2,
                                "failureThreshold": 3,
                            },
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "echo-a1", "namespace": "rl", "labels": labels, "annotations": annotations},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/instance": "echo-a1"},
            "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    assert provider.url == "http://echo-a1.rl.svc.cluster.local:8000"


def test_names_and_urls() -> None:
    generated = KubernetesProvider("ghcr.io/Org/My_Env:2")
    assert generated.name.startswith("providers-test-my-env-")
    assert KubernetesProvider("x:1", base_url="http://127.0.0.1:9000").url == "http://127.0.0.1:9000"
    with pytest.raises(ConfigurationError, match="not a valid Kubernetes name"):
        KubernetesProvider("x:1", name="Bad_Name")
    with pytest.raises(ConfigurationError, match="replicas"):
        KubernetesProvider("x:1", replicas=0)
