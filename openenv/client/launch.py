"""Clients that start their own server: `from_docker_image`, `from_process` (and `from_hub`).

Each returns a `Launch`: `await` it for a connected async client, or call `.sync()` on it for a
connected blocking one. The client owns the provider: `close()` stops the server, and so does
interpreter exit (`providers.lifecycle`).

    env = await EchoEnv.from_docker_image("echo-env:latest")
    with EchoEnv.from_process("envs/echo_env").sync() as env: ...
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from openenv.client._loop import run_sync

if TYPE_CHECKING:
    from openenv.client.providers.base import Provider
    from openenv.client.sync import SyncEnvClient

__all__ = ["CLIENT_OPTIONS", "Launch", "connect_with_provider", "from_docker_image", "from_process", "split_options"]


class LaunchableClient(Protocol):
    """What starting a client needs of its class (an `EnvClient` subclass matches it).

    A Protocol, so this module need not import `EnvClient` (whose `from_*` methods call this module).
    """

    def __init__(self, base_url: str, **options: Any) -> None: ...

    async def connect(self) -> object: ...

    async def close(self) -> None: ...

    def sync(self) -> SyncEnvClient[Any, Any, Any]: ...


C = TypeVar("C", bound=LaunchableClient)

# Keyword arguments that belong to the client; all others go to the provider.
CLIENT_OPTIONS = frozenset({"token", "headers", "connect_timeout_s", "message_timeout_s", "max_message_size_mb"})


class Launch(Generic[C]):
    """A client being started: `await launch` → connected client; `launch.sync()` → blocking client."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, C]]) -> None:
        self._make = make  # the coroutine is made only when used, so an unused Launch never warns

    def __await__(self) -> Generator[Any, None, C]:
        return self._make().__await__()

    def sync(self) -> SyncEnvClient[Any, Any, Any]:
        """Start and connect on the shared background loop; returns the blocking client."""
        return run_sync(self._make()).sync()


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(client options, provider options) of a `from_*` call's keyword arguments."""
    client = {k: v for k, v in options.items() if k in CLIENT_OPTIONS}
    provider = {k: v for k, v in options.items() if k not in CLIENT_OPTIONS}
    return client, provider


async def connect_with_provider(cls: type[C], provider: Provider, client_options: dict[str, Any]) -> C:
    """Start `provider`, then connect a `cls` client that owns it (and stops it on close).

    Raises:
        ProviderStartError: the server did not come up (nothing is left running).
        EnvConnectionError: it came up but the client could not connect (the server is stopped).
    """
    url = await provider.astart()
    client = cls(url, provider=provider, **client_options)
    try:
        await client.connect()
    except BaseException:
        await client.close()
        raise
    return client


def from_docker_image(cls: type[C], image: str, *, provider: Provider | None = None, **options: Any) -> Launch[C]:
    """See `EnvClient.from_docker_image`."""
    client_options, provider_options = split_options(options)
    if "env_vars" in provider_options:  # upstream's name for the container's environment
        provider_options["env"] = {**provider_options.pop("env_vars"), **provider_options.get("env", {})}

    async def _make() -> C:
        from openenv.client.providers.container import ContainerProvider

        return await connect_with_provider(
            cls, provider or ContainerProvider(image, **provider_options), client_options
        )

    return Launch(_make)


def from_process(cls: type[C], env_dir: str | Path, **options: Any) -> Launch[C]:
    """See `EnvClient.from_process`."""
    client_options, provider_options = split_options(options)

    async def _make() -> C:
        from openenv.client.providers.process import ProcessProvider

        return await connect_with_provider(cls, ProcessProvider(env_dir, **provider_options), client_options)

    return Launch(_make)
