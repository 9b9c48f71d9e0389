"""The container runtime a client asks for: refused before anything runs when the engine lacks it,
and checked on the host once the container runs (gVisor's sandbox, or the image's own program)."""

from __future__ import annotations

import pytest
from echo_env import EchoAction, EchoEnv

from openenv.client.providers import ContainerProvider
from openenv.errors import ProviderUnavailableError
from tests.support.systems import require_runsc, use_podman

pytestmark = pytest.mark.docker


async def test_a_runtime_the_engine_lacks_is_refused_before_anything_runs(echo_image: str, docker_engine) -> None:
    provider = ContainerProvider(echo_image, runtime="no-such-runtime")
    with pytest.raises(
        ProviderUnavailableError, match=r"the container engine has no runtime 'no-such-runtime' \(it has"
    ):
        await provider.astart()
    assert provider.container_id is None
    assert not provider.client.containers.list(all=True, filters={"name": provider.name})


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
async def test_the_runtime_a_container_got_is_seen_on_the_host(
    echo_image: str, docker_engine, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if runtime == "runsc":
        require_runsc()
    monkeypatch.setenv("OPENENV_CONTAINER_RUNTIME", runtime)  # the client-wide setting
    provider = ContainerProvider(echo_image)
    async with provider:
        async with EchoEnv(provider.base_url) as env:
            await env.reset()
            assert (await env.step(EchoAction(message="hi"))).observation.echoed_message == "hi"
        seen = provider.observed_runtime()
        assert seen.claimed == runtime
        assert seen.gvisor is (runtime == "runsc"), seen.evidence
        assert provider.describe()["runtime"] == runtime


async def test_podman_refuses_a_runtime_other_than_its_services_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Podman's Docker-compatible API ignores a container's runtime (asked for runsc, a container ran
    under runc): a container that asks for one other than the service's default is refused, not
    run unconfined."""
    use_podman(monkeypatch)
    provider = ContainerProvider("openenv-test/never-run:1", runtime="no-such-runtime")
    with pytest.raises(
        ProviderUnavailableError, match=r"Podman's API service runs every container under its default runtime \(runc\)"
    ):
        await provider.astart()
    assert provider.container_id is None
