"""`EngineView`: the parts of a `RolloutEngine` that branching rollouts (`branching.py`) use.

A Protocol, so `branching` need not import the engine that calls it: `RolloutEngine` passes
itself and matches it structurally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from openenv.training.records import Completion, EpisodeRecord, PolicyInput

if TYPE_CHECKING:
    from openenv.client.base import EnvClient

__all__ = ["EngineView"]


class EngineView(Protocol):
    """A rollout engine's servers, client, policy, prompt and limits."""

    @property
    def urls(self) -> Sequence[str]: ...

    @property
    def client_cls(self) -> type[EnvClient[Any, Any, Any]]: ...

    @property
    def client_options(self) -> dict[str, Any]: ...

    @property
    def policy(self) -> Callable[[PolicyInput], Any]: ...

    @property
    def prompt(self) -> Callable[[Any, EpisodeRecord], Any]: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def max_turns(self) -> int: ...

    @property
    def reset_kwargs(self) -> dict[str, Any]: ...

    def _action_of(self, out: Any, observation: Any) -> tuple[Completion | None, Any]:
        """The policy's answer `out` as (its `Completion`, or None when it gave an action, the action)."""
