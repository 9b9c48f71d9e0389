"""`Environment`: the class an environment author subclasses.

Implement `reset`, `step` and the `state` property (or their `*_async` twins when the
environment does its work with asyncio). One instance serves one session; the server builds a
fresh instance per WebSocket connection and calls `close()` when the session ends.

How the server runs synchronous methods is set by `EXECUTION`:

- ``"auto"`` (default): calls start in a shared worker pool and are timed; once a method has
  proved fast (64 calls in a row under 1 ms) it runs directly on the event loop, which is several
  times cheaper; if such a call ever takes over 10 ms it goes back to the pool. A slow or blocking
  method never holds the loop for more than one call.
- ``"thread"``: always in the shared worker pool (blocking I/O, long computations).
- ``"inline"``: always on the event loop (tiny, CPU-light methods only).

No mode makes a thread per session.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Literal, TypeVar

from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = ["Environment"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class Environment(Generic[ActT, ObsT, StateT]):
    """Base class of an environment: Gymnasium-style `reset` / `step` / `state`.

    Class attributes:
        SUPPORTS_CONCURRENT_SESSIONS: True when several instances can live in one process
            without sharing mutable state. When False, the server allows one session at a time.
        EXECUTION: how synchronous methods are run; see the module docstring.
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    EXECUTION: ClassVar[Literal["auto", "thread", "inline"]] = "auto"

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start a new episode and return its first observation.

        Args:
            seed: seed for the episode's randomness; the same seed gives the same episode.
            episode_id: identifier to give the new episode (the environment picks one if None).
            **kwargs: environment-specific reset options sent by the client.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reset() or reset_async()")

    def step(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Apply one action and return the resulting observation (with `reward` and `done`).

        Args:
            action: a validated instance of the environment's action class.
            timeout_s: the client's time limit for this step, if it sent one. The server stops
                waiting after it (plus a short grace); honour it to stop work early.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step() or step_async()")

    @property
    def state(self) -> StateT:
        """The environment's current state (at least `episode_id` and `step_count`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement the state property")

    def close(self) -> None:
        """Release what the instance holds (processes, files, sockets). Called once per session."""

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Async twin of `reset`; override it instead of `reset` in an asyncio environment."""
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Async twin of `step`; override it instead of `step` in an asyncio environment."""
        return self.step(action, timeout_s=timeout_s, **kwargs)

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment for `GET /metadata`. Defaults come from the class."""
        doc = (type(self).__doc__ or "").strip()
        return EnvironmentMetadata(name=type(self).__name__, description=doc.splitlines()[0] if doc else "")

    @classmethod
    def _has_async(cls, name: str) -> bool:
        """Whether the subclass overrides the async twin of method `name`."""
        return getattr(cls, f"{name}_async") is not getattr(Environment, f"{name}_async")
