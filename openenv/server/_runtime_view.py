"""`RuntimeView`: the parts of an `EnvRuntime` that the helpers it holds (`McpService`, `Forks`) use.

A Protocol, so those helpers need not import the runtime that builds them: `EnvRuntime` passes
itself and matches it structurally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from openenv.env import AnyEnvironment
from openenv.server.execution import Executor
from openenv.server.sessions import Session, SessionManager
from openenv.server.settings import ServerSettings

__all__ = ["RuntimeView"]


class RuntimeView(Protocol):
    """One server's environment factory, settings, executor and sessions."""

    @property
    def env_factory(self) -> Callable[[], AnyEnvironment]: ...

    @property
    def settings(self) -> ServerSettings: ...

    @property
    def executor(self) -> Executor: ...

    @property
    def sessions(self) -> SessionManager: ...

    async def open_session(self, on_expire: Any = None) -> Session:
        """A new session in the runtime's `sessions`."""
