"""`AsyncClient`: the calls `SyncEnvClient` makes on the async client it wraps.

A Protocol, so `sync` need not import `EnvClient` (whose `.sync()` builds a `SyncEnvClient`):
an `EnvClient[A, O, S]` matches `AsyncClient[A, O, S]` structurally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from openenv.mcp.types import Tool
from openenv.types import Snapshot, StepResult

if TYPE_CHECKING:
    from openenv.render import Frame

__all__ = ["AsyncClient"]

# Actions only go in, states only come out; observations come in a (mutable) StepResult.
ActT_contra = TypeVar("ActT_contra", contravariant=True)
ObsT = TypeVar("ObsT")
StateT_co = TypeVar("StateT_co", covariant=True)


class AsyncClient(Protocol[ActT_contra, ObsT, StateT_co]):
    """An async client of one session, as `SyncEnvClient` drives it (see `EnvClient`)."""

    @property
    def provider(self) -> Any:
        """The provider the client stops on close, or None."""
        ...

    @property
    def _conn(self) -> object:
        """The open connection, or None (read at interpreter exit)."""
        ...

    async def connect(self) -> object: ...

    async def reset(self, **kwargs: Any) -> StepResult[ObsT]: ...

    async def step(self, action: ActT_contra, *, timeout_s: float | None = None) -> StepResult[ObsT]: ...

    async def state(self) -> StateT_co: ...

    async def render(self) -> Frame | None: ...

    async def list_tools(self, use_cache: bool = True) -> list[Tool]: ...

    async def call_tool(self, name: str, /, **arguments: Any) -> Any: ...

    async def list_splits(self) -> list[Any]: ...

    async def list_tasks(self, split: str) -> list[Any]: ...

    async def num_tasks(self, split: str) -> int: ...

    async def get_task(self, split: str, index: int) -> Any: ...

    async def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]: ...

    async def new_session(self) -> AsyncClient[ActT_contra, ObsT, StateT_co]: ...

    async def snapshot(self) -> Snapshot: ...

    async def restore(self, snapshot: Snapshot | str) -> StepResult[ObsT] | None: ...

    async def release(self, snapshot: Snapshot | str) -> None: ...

    async def fork(
        self, n: int = 1, *, snapshot: Snapshot | str | None = None
    ) -> Sequence[AsyncClient[ActT_contra, ObsT, StateT_co]]: ...

    async def close(self) -> None: ...
