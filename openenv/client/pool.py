"""`EnvPool`: N servers of one env, started at once, with sessions handed out across them.

What a trainer with many parallel rollouts needs:

    async with EnvPool.docker("echo-env:latest", size=8, client_cls=EchoEnv) as pool:
        async def rollout(i):
            async with pool.session() as env:          # least-loaded server; waits when all full
                await env.reset(seed=i)
                ...
        await asyncio.gather(*(rollout(i) for i in range(64)))

Servers start concurrently (each provider's blocking work runs in its own worker thread) and
the pool is usable when all are healthy; if any fails, the others are stopped and the error is
raised. `close()` (or leaving `async with`) closes every session and stops every server.
A server that cannot be reached is taken out of rotation and the session goes to another.

Sized from the OpenEnv Hub's capacity card (the sessions one server held in its smoke test):

    async with EnvPool.from_hub("alice/chess_env", sessions=64, trust_remote_code=True) as pool:
        ...                                            # ceil(64 / sessions_held) containers
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from openenv.client.base import EnvClient
from openenv.client.generic import GenericEnvClient
from openenv.client.providers.base import Provider
from openenv.errors import ConfigurationError, EnvConnectionError, EnvTimeoutError, RemoteCodeError

if TYPE_CHECKING:
    from openenv.client._pool_watch import ReplicaWatch
    from openenv.client.lock import Lock

__all__ = ["EnvPool", "servers_for"]

# mypy cannot accept a default for a parameter typed by a TypeVar (python/mypy#3737), so each
# `client_cls: type[C] = GenericEnvClient` below carries a `type: ignore[assignment]`.
C = TypeVar("C", bound=EnvClient[Any, Any, Any])


@dataclass
class _Instance:
    url: str
    provider: Provider
    active: int = 0
    alive: bool = True


class EnvPool(Generic[C]):
    """Start `size` env servers and hand out sessions across them.

    Args:
        providers: the providers (not started), or a zero-argument factory called `size` times.
        size: how many providers to make with the factory.
        client_cls: the client class of the sessions (default: GenericEnvClient).
        max_sessions_per_instance: sessions one server takes at once; `session()` waits for a
            free slot beyond that (None: no limit, balance only).
        client_options: keyword arguments for every client (token, message_timeout_s, ...).
    """

    def __init__(
        self,
        providers: Sequence[Provider] | Callable[[], Provider],
        size: int | None = None,
        *,
        client_cls: type[C] = GenericEnvClient,  # type: ignore[assignment]
        max_sessions_per_instance: int | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        if callable(providers) and not isinstance(providers, Sequence):
            if size is None or size < 1:
                raise ConfigurationError("EnvPool(factory, size): size must be >= 1")
            providers = [providers() for _ in range(size)]
        elif size is not None and size != len(providers):
            raise ConfigurationError(f"size={size} but {len(providers)} providers were given")
        if not providers:
            raise ConfigurationError("an EnvPool needs at least one provider")
        if max_sessions_per_instance is not None and max_sessions_per_instance < 1:
            raise ConfigurationError("max_sessions_per_instance must be >= 1")
        self.providers: list[Provider] = list(providers)
        self.client_cls = client_cls
        self.max_sessions_per_instance = max_sessions_per_instance
        self.client_options = dict(client_options or {})
        self.instances: list[_Instance] = []
        self._sessions: dict[int, tuple[C, _Instance]] = {}
        self._changed = asyncio.Condition()
        self._closed = False
        self.hub_info: Any = None  # the Hub service's resolve record, for a pool made by `from_hub`
        self._watch: ReplicaWatch | None = None  # replaces dead servers, for a pool made by `ray`

    # -- ways to build one --------------------------------------------------------------------------

    @classmethod
    def docker(
        cls,
        image: str,
        size: int,
        *,
        client_cls: type[C] = GenericEnvClient,  # type: ignore[assignment]
        max_sessions_per_instance: int | None = None,
        client_options: dict[str, Any] | None = None,
        **provider_options: Any,
    ) -> EnvPool[C]:
        """A pool of `size` containers of `image` (options go to `ContainerProvider`)."""
        from openenv.client.providers.container import ContainerProvider

        return cls(
            lambda: ContainerProvider(image, **provider_options),
            size,
            client_cls=client_cls,
            max_sessions_per_instance=max_sessions_per_instance,
            client_options=client_options,
        )

    @classmethod
    def process(
        cls,
        env_dir: str | Path,
        size: int,
        *,
        client_cls: type[C] = GenericEnvClient,  # type: ignore[assignment]
        max_sessions_per_instance: int | None = None,
        client_options: dict[str, Any] | None = None,
        **provider_options: Any,
    ) -> EnvPool[C]:
        """A pool of `size` local server processes of an env folder (options go to `ProcessProvider`)."""
        from openenv.client.providers.process import ProcessProvider

        return cls(
            lambda: ProcessProvider(env_dir, **provider_options),
            size,
            client_cls=client_cls,
            max_sessions_per_instance=max_sessions_per_instance,
            client_options=client_options,
        )

    @classmethod
    def ray(
        cls,
        env_dir: str | Path | None = None,
        size: int = 1,
        *,
        image: str | None = None,
        client_cls: type[C] = GenericEnvClient,  # type: ignore[assignment]
        max_sessions_per_instance: int | None = None,
        client_options: dict[str, Any] | None = None,
        health_interval_s: float = 0.5,
        **provider_options: Any,
    ) -> EnvPool[C]:
        """A pool of `size` env servers as Ray actors spread over the cluster's nodes: an env folder
        run as a process in each actor, or `image` as a container on each actor's node (options go
        to `RayProvider`: address, num_cpus, ray_options...). A server whose actor or node dies is
        replaced; its sessions raise `EnvDisconnectedError`. Needs the `ray` extra.
        """
        from openenv.client._pool_watch import ReplicaWatch
        from openenv.client.providers.ray import RayProvider

        provider = RayProvider(env_dir, image=image, replicas=size, **provider_options)
        pool = cls(
            [provider],
            client_cls=client_cls,
            max_sessions_per_instance=max_sessions_per_instance,
            client_options=client_options,
        )
        pool._watch = ReplicaWatch(pool, health_interval_s)
        return pool

    @classmethod
    def from_hub(
        cls,
        repo_id: str,
        sessions: int | None = None,
        *,
        revision: str | None = None,
        size: int | None = None,
        client_cls: type[C] = GenericEnvClient,  # type: ignore[assignment]
        trust_remote_code: bool | None = None,
        max_sessions_per_instance: int | None = None,
        client_options: dict[str, Any] | None = None,
        lock: str | Path | Lock | None = None,
        **provider_options: Any,
    ) -> EnvPool[C]:
        """A pool of containers of the image the OpenEnv Hub service (OPENENV_HUB_URL) lists for
        `repo_id` (`owner/name[@revision]`), sized for `sessions` concurrent sessions. With `lock`
        (a lock file's path or `Lock`; default OPENENV_LOCK) only the locked revision and image are
        accepted (`LockMismatchError` otherwise) and the lock's Hub is asked when none is set.

        With `sessions`, the pool starts ceil(sessions / sessions_held) servers, `sessions_held`
        being what one server of that revision held in the Hub's smoke test (its capacity card),
        and puts at most that many sessions on each (unless `max_sessions_per_instance` says
        otherwise). `size` sets the number of servers yourself instead. The record the Hub gave,
        capacity card included, is `pool.hub_info`. Asks the Hub once, now (a short blocking GET);
        the servers start on `start()` / `async with`.

        Raises:
            ConfigurationError: no Hub configured, neither `sessions` nor `size`, no image to run,
                or `sessions` given for an env whose capacity was not measured (pass `size`).
            ResolutionError: the Hub does not know the env, or cannot be reached.
            RemoteCodeError: running the env here needs `trust_remote_code=True`
                (or OPENENV_TRUST_REMOTE_CODE=1).
            LockMismatchError: the lock does not name the env, or the Hub gives another revision or image.
        """
        from openenv.client import _settings
        from openenv.client._hub_service import HubServiceError, fetch_record
        from openenv.client.env_id import EnvId, parse_env_id
        from openenv.client.lock import load_lock
        from openenv.client.providers.container import ContainerProvider
        from openenv.errors import ResolutionError

        env_id = parse_env_id(repo_id, revision)
        locked_by = load_lock(lock)
        locked = locked_by.entry(env_id) if locked_by is not None else None
        if locked is not None:
            env_id = EnvId(env_id.owner, env_id.name, locked.revision)
        if sessions is None and size is None:
            raise ConfigurationError("EnvPool.from_hub needs sessions= (how many at once) or size= (how many servers)")
        if sessions is not None and sessions < 1:
            raise ConfigurationError("sessions must be >= 1")
        hub = _settings.hub_url() or (locked_by.hub if locked_by is not None else None)
        if hub is None:
            raise ConfigurationError("EnvPool.from_hub asks an OpenEnv Hub service: set OPENENV_HUB_URL")
        if not (_settings.trust_remote_code() if trust_remote_code is None else trust_remote_code):
            raise RemoteCodeError(
                f"the pool would run {env_id.repo_id}'s code on this machine; if you trust it, pass "
                "trust_remote_code=True (or set OPENENV_TRUST_REMOTE_CODE=1)"
            )
        try:
            record = fetch_record(
                hub, env_id.repo_id, env_id.revision, token=None, lock=locked_by.id if locked_by is not None else None
            )
        except HubServiceError as exc:
            raise ResolutionError(str(exc), attempts=[("hub", str(exc))]) from None
        if locked is not None:
            locked.check_record(record.sha, record.image_digest, hub)
        if record.image is None:
            raise ConfigurationError(
                f"{hub} lists no image for {env_id.repo_id}; start a pool of its folder with EnvPool.process"
            )
        held = record.sessions_held
        if size is None:
            if held is None:
                raise ConfigurationError(
                    f"{hub} has no measured capacity for {env_id.repo_id}@{(record.sha or '?')[:12]}; "
                    "pass size= (how many servers) instead"
                )
            size = servers_for(sessions or 1, record.capacity)
        if max_sessions_per_instance is None and sessions is not None and held is not None:
            max_sessions_per_instance = held
        options = {"port": record.port, **provider_options}
        pool: EnvPool[C] = cls(
            lambda: ContainerProvider(record.image or "", **options),
            size,
            client_cls=client_cls,
            max_sessions_per_instance=max_sessions_per_instance,
            client_options=client_options,
        )
        pool.hub_info = record
        return pool

    # -- lifecycle ----------------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        """The base URLs of the servers in rotation."""
        return [i.url for i in self.instances if i.alive]

    async def start(self) -> EnvPool[C]:
        """Start every server concurrently; returns the pool once all are healthy.

        Raises:
            ProviderStartError: a server did not come up; all the others have been stopped.
        """
        if self.instances:
            return self
        results = await asyncio.gather(*(p.astart() for p in self.providers), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self._stop_providers()
            raise failures[0]
        self.instances = [_Instance(url, p) for p in self.providers for url in (p.base_urls or [p.base_url])]  # type: ignore[list-item]
        if self._watch is not None:
            self._watch.start()
        return self

    async def close(self) -> None:
        """Close every session handed out and stop every server (idempotent)."""
        self._closed = True
        if self._watch is not None:
            await self._watch.stop()
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(client.close() for client, _ in sessions), return_exceptions=True)
        await self._stop_providers()
        async with self._changed:
            self._changed.notify_all()

    async def _stop_providers(self) -> None:
        results = await asyncio.gather(*(p.astop() for p in self.providers), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def __aenter__(self) -> EnvPool[C]:
        try:
            return await self.start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sessions -----------------------------------------------------------------------------------

    async def acquire(self, timeout_s: float | None = None) -> C:
        """A connected client on the least-loaded server (waits while every server is full).

        Give it back with `release(client)`, or use `session()`.

        Raises:
            EnvConnectionError: no server of the pool can be reached, or the pool is closed.
            EnvTimeoutError: no slot became free within `timeout_s`.
        """
        if not self.instances:
            await self.start()
        while True:
            instance = await self._reserve(timeout_s)
            client = self.client_cls(instance.url, **self.client_options)
            try:
                await client.connect()
            except EnvConnectionError:
                instance.alive = False  # take it out of rotation; try another server
                await self._unreserve(instance)
                continue
            except BaseException:
                await self._unreserve(instance)
                raise
            self._sessions[id(client)] = (client, instance)
            return client

    async def release(self, client: C) -> None:
        """Close a client from `acquire` and free its slot."""
        entry = self._sessions.pop(id(client), None)
        try:
            await client.close()
        finally:
            if entry is not None:
                await self._unreserve(entry[1])

    @contextlib.asynccontextmanager
    async def session(self, timeout_s: float | None = None) -> AsyncIterator[C]:
        """`async with pool.session() as env:` a client from `acquire`, released at the end."""
        client = await self.acquire(timeout_s)
        try:
            yield client
        finally:
            await self.release(client)

    async def _reserve(self, timeout_s: float | None) -> _Instance:
        async def _pick() -> _Instance:
            async with self._changed:
                while True:
                    if self._closed:
                        raise EnvConnectionError("the pool is closed")
                    alive = [i for i in self.instances if i.alive]
                    if not alive:
                        raise EnvConnectionError(
                            f"no server of the pool can be reached ({len(self.instances)} were started); see their logs"
                        )
                    best = min(alive, key=lambda i: i.active)
                    if self.max_sessions_per_instance is None or best.active < self.max_sessions_per_instance:
                        best.active += 1
                        return best
                    await self._changed.wait()

        try:
            return await asyncio.wait_for(_pick(), timeout_s) if timeout_s is not None else await _pick()
        except TimeoutError:
            raise EnvTimeoutError(f"no free session slot in the pool within {timeout_s:g}s") from None

    async def _unreserve(self, instance: _Instance) -> None:
        async with self._changed:
            instance.active -= 1
            self._changed.notify()

    # -- servers that die (a pool made by `ray`) ------------------------------------------------------

    @property
    def replacements(self) -> int:
        """How many dead servers this pool has replaced."""
        return self._watch.replacements if self._watch is not None else 0

    def node_of(self, url: str) -> str | None:
        """The cluster node serving `url` (also for servers already replaced); None outside a cluster."""
        return self._watch.node_of(url) if self._watch is not None else None

    async def _retire(self, url: str) -> None:
        """Take a dead server out of rotation and close the sessions still open on it."""
        for instance in self.instances:
            if instance.url == url:
                instance.alive = False
        for client, instance in list(self._sessions.values()):
            if instance.url == url:
                conn = getattr(client, "_conn", None)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
        async with self._changed:
            self._changed.notify_all()

    async def _admit(self, url: str, provider: Provider) -> None:
        """Put a (replacement) server into rotation."""
        self.instances.append(_Instance(url, provider))
        async with self._changed:
            self._changed.notify_all()

    def __repr__(self) -> str:
        replaced = f", {self.replacements} replaced" if self._watch is not None else ""
        return f"<EnvPool {len(self.urls)}/{len(self.providers)} servers, {len(self._sessions)} sessions{replaced}>"


def servers_for(sessions: int, capacity: dict[str, Any] | None) -> int:
    """How many servers hold `sessions` concurrent sessions, by a Hub capacity card:
    ceil(sessions / sessions_held).

    Raises:
        ConfigurationError: `sessions` < 1, or the card has no measured `sessions_held`.
    """
    from openenv.client._hub_service import sessions_held

    if sessions < 1:
        raise ConfigurationError("sessions must be >= 1")
    held = sessions_held(capacity)
    if held is None:
        raise ConfigurationError(
            "the capacity card has no measured sessions_held; choose the number of servers yourself"
        )
    return math.ceil(sessions / held)
