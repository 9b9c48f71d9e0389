"""The old Docker-only names of engine-neutral things still work for one release, and warn: the
provider `DockerProvider` (now `ContainerProvider`), the `from_hub` step "docker" (now
"container"), and a Hub's resolve record that names its container command only `local.docker`
(now `local.container`). docs/providers.md, "Deprecated names", lists them."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from echo_env import EchoEnv
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openenv.client._hub_service import fetch_record
from openenv.client.providers.container import ContainerProvider
from openenv.errors import RemoteCodeError
from tests.support.servers import serve_app

RENAMED = "DockerProvider is deprecated, use ContainerProvider; the alias goes in the next release"


def test_docker_provider_is_container_provider_and_warns_at_each_use() -> None:
    providers = importlib.import_module("openenv.client.providers")
    for _ in range(2):  # never stored under the old name: the second use warns as well
        with pytest.warns(DeprecationWarning, match=RENAMED) as caught:
            assert providers.DockerProvider is ContainerProvider
        assert caught[0].filename == __file__  # the warning points at the code that used the old name
    with pytest.warns(DeprecationWarning, match=RENAMED):
        from openenv.client.providers import DockerProvider
    assert DockerProvider is ContainerProvider
    with pytest.warns(DeprecationWarning, match=RENAMED) as caught:
        from openenv.client.providers.docker import DockerProvider as from_module
    assert from_module is ContainerProvider and caught[0].filename == __file__
    assert "DockerProvider" not in providers.__all__ and "ContainerProvider" in providers.__all__


def test_the_old_provider_module_still_gives_its_other_names_without_a_warning(
    recwarn: pytest.WarningsRecorder,
) -> None:
    from openenv.client.providers.container import ImageDigestError, container_name
    from openenv.client.providers.docker import ImageDigestError as old_error
    from openenv.client.providers.docker import container_name as old_name

    assert old_error is ImageDigestError and old_name is container_name
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    with pytest.raises(AttributeError, match="no attribute 'NoSuchProvider'"):
        importlib.import_module("openenv.client.providers.docker").NoSuchProvider  # noqa: B018


async def test_the_step_docker_is_the_step_container(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_TRUST_REMOTE_CODE", raising=False)
    with pytest.warns(DeprecationWarning, match="the step 'docker' is deprecated, use 'container'") as caught:
        launch = EchoEnv.from_hub("alice/echo_env", steps=("docker",), trust_remote_code=False)
    assert caught[0].filename == __file__
    with pytest.raises(RemoteCodeError) as refused:  # the step ran under its new name (and was skipped: no trust)
        await launch
    assert [step for step, _ in refused.value.attempts] == ["container"]


@pytest.fixture()
def records() -> Iterator[tuple[str, dict]]:
    """A resolve service (the shape in docs/hub-api.md) serving the records put in the dict."""
    served: dict = {}

    async def resolve(request: Request) -> JSONResponse:
        return JSONResponse(served[f"{request.path_params['owner']}/{request.path_params['name']}"])

    with serve_app(Starlette(routes=[Route("/api/v1/envs/{owner}/{name}/resolve", resolve)])) as url:
        yield url, served


def test_a_record_from_an_older_hub_gives_its_container_command_by_the_old_name(records: tuple[str, dict]) -> None:
    url, served = records
    command = "docker run --rm -p 127.0.0.1:8000:8000 openenv-hub/echo:abc"
    base = {"repo_id": "alice/echo_env", "revision": "a" * 40, "image": "openenv-hub/echo:abc"}
    served["alice/old"] = {**base, "local": {"docker": command, "python": "..."}}
    served["alice/new"] = {**base, "local": {"container": command, "docker": "an older client's copy"}}
    served["alice/none"] = {**base, "local": {"python": "..."}}
    assert fetch_record(url, "alice/old", None, token=None).container_command == command
    assert fetch_record(url, "alice/new", None, token=None).container_command == command  # the new name first
    assert fetch_record(url, "alice/none", None, token=None).container_command is None
