"""`SyncEnvClient`: blocking calls over an async `EnvClient`.

Every sync client in the process shares one event loop that runs in a daemon thread
(`openenv.client._loop`; this module re-exports its `run_sync`). Calls are handed to it and
waited for, so they work the same in a script, in a thread, and inside Jupyter (whose own loop
is already running in the calling thread), and the loop keeps answering the server's pings
while the user thinks between steps.
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from openenv.client._async_client import AsyncClient
from openenv.client._loop import loop_running, run_sync
from openenv.mcp.types import Tool
from openenv.types import Snapshot, StepResult

if TYPE_CHECKING:
    from openenv.render import Frame

__all__ = ["SyncEnvClient", "run_sync"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")


class SyncEnvClient(Generic[ActT, ObsT, StateT]):
    """Blocking twin of an `EnvClient`; made by `client.sync()`.

    with EchoEnv("http://127.0.0.1:8000").sync() as env:
        env.reset()
        env.step(EchoAction(message="hi"))
    """

    def __init__(self, async_client: AsyncClient[ActT, ObsT, StateT]) -> None:
        self._client = async_client
        _track(self)

    @property
    def async_client(self) -> AsyncClient[ActT, ObsT, StateT]:
        """The async client underneath (its methods run on the shared loop)."""
        return self._client

    def connect(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        run_sync(self._client.connect())
        return self

    def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start a new episode; see `EnvClient.reset`."""
        return run_sync(self._client.reset(**kwargs))

    def step(self, action: ActT, *, timeout_s: float | None = None) -> StepResult[ObsT]:
        """Apply one action; see `EnvClient.step`."""
        return run_sync(self._client.step(action, timeout_s=timeout_s))

    def state(self) -> StateT:
        """The environment's current state; see `EnvClient.state`."""
        return run_sync(self._client.state())

    def render(self) -> Frame | None:
        """A picture of the environment now, or None; see `EnvClient.render`."""
        return run_sync(self._client.render())

    def list_tools(self, use_cache: bool = True) -> list[Tool]:
        """The server's MCP tools; see `EnvClient.list_tools`."""
        return run_sync(self._client.list_tools(use_cache))

    def call_tool(self, name: str, /, **arguments: Any) -> Any:
        """Call an MCP tool and return its result; see `EnvClient.call_tool`."""
        return run_sync(self._client.call_tool(name, **arguments))

    def list_splits(self) -> list[Any]:
        """The environment's task splits; see `EnvClient.list_splits`."""
        return run_sync(self._client.list_splits())

    def list_tasks(self, split: str) -> list[Any]:
        """Every task of `split`; see `EnvClient.list_tasks`."""
        return run_sync(self._client.list_tasks(split))

    def num_tasks(self, split: str) -> int:
        """How many tasks `split` has."""
        return run_sync(self._client.num_tasks(split))

    def get_task(self, split: str, index: int) -> Any:
        """Task `index` of `split`; `reset(split=split, index=index)` plays it."""
        return run_sync(self._client.get_task(split, index))

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        """Tasks `start` to `stop` of `split`."""
        return run_sync(self._client.get_task_range(split, start, stop))

    def new_session(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """Another session on the same server, closed with this one; see `EnvClient.new_session`."""
        return SyncEnvClient(run_sync(self._client.new_session()))

    def snapshot(self) -> Snapshot:
        """Have the server keep the state now; see `EnvClient.snapshot`."""
        return run_sync(self._client.snapshot())

    def restore(self, snapshot: Snapshot | str) -> StepResult[ObsT] | None:
        """Go back to `snapshot`'s state; see `EnvClient.restore`."""
        return run_sync(self._client.restore(snapshot))

    def release(self, snapshot: Snapshot | str) -> None:
        """Let the server drop `snapshot`; see `EnvClient.release`."""
        run_sync(self._client.release(snapshot))

    def fork(self, n: int = 1, *, snapshot: Snapshot | str | None = None) -> list[SyncEnvClient[ActT, ObsT, StateT]]:
        """`n` new sessions in this one's state, each with a blocking client; see `EnvClient.fork`."""
        return [SyncEnvClient(child) for child in run_sync(self._client.fork(n, snapshot=snapshot))]

    def get_state(self) -> Snapshot:
        """Upstream's name for `snapshot()`."""
        return self.snapshot()

    def set_state(self, snapshot: Snapshot | str) -> StepResult[ObsT] | None:
        """Upstream's name for `restore()`."""
        return self.restore(snapshot)

    def close(self) -> None:
        """End the session and stop any provider the client started."""
        if loop_running():
            run_sync(self._client.close())

    def __enter__(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Other async methods of the client (e.g. env-specific helpers) become blocking here.
        attr = getattr(self._client, name)
        if asyncio.iscoroutinefunction(attr):
            return lambda *a, **kw: run_sync(attr(*a, **kw))
        return attr

    def __repr__(self) -> str:
        return f"<SyncEnvClient of {self._client!r}>"


_clients: weakref.WeakSet[SyncEnvClient[Any, Any, Any]] = weakref.WeakSet()


def _track(client: SyncEnvClient[Any, Any, Any]) -> None:
    _clients.add(client)


@atexit.register
def _close_all() -> None:
    # Close sessions (and stop providers) the user left open, while the loop still runs.
    for client in list(_clients):
        try:
            if client._client._conn is not None or client._client.provider is not None:
                client.close()
        except Exception:  # interpreter shutdown: best effort, never a traceback on exit
            pass
    _clients.clear()
