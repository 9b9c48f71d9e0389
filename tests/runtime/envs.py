"""Small environments that misbehave on purpose, for runtime tests."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from pydantic import Field

from openenv import Action, EnvClient, Environment, Observation, State


class CountAction(Action):
    message: str = ""
    fail: bool = False
    sleep_s: float = Field(default=0.0, ge=0)
    meta: dict[str, Any] | None = None
    done: bool = False


class CountObservation(Observation):
    echoed: str
    count: int
    thread: str = ""


class CountState(State):
    last_message: str = ""


class CountClient(EnvClient[CountAction, CountObservation, CountState]):
    """The typed client of `CountEnv`."""


class CountEnv(Environment[CountAction, CountObservation, CountState]):
    """Counts steps; raises, sleeps, reports metadata or ends the episode when asked."""

    instances = 0
    closed = 0
    lock = threading.Lock()

    def __init__(self) -> None:
        with CountEnv.lock:
            CountEnv.instances += 1
        self._state = CountState(episode_id="new")
        self.seed: int | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self.seed = seed
        self._state = CountState(episode_id=episode_id or f"ep-{seed}")
        return CountObservation(echoed="ready", count=0, reward=0.0, metadata={"seed": seed, "options": sorted(kwargs)})

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        if action.fail:
            raise ValueError(f"asked to fail on {action.message!r}")
        if action.sleep_s:
            time.sleep(action.sleep_s)
        self._state.step_count += 1
        self._state.last_message = action.message
        return CountObservation(
            echoed=action.message,
            count=self._state.step_count,
            reward=float(self._state.step_count),
            done=action.done,
            metadata=action.meta or {},
            thread=threading.current_thread().name,
        )

    @property
    def state(self) -> CountState:
        return self._state

    def close(self) -> None:
        with CountEnv.lock:
            CountEnv.closed += 1


class AsyncCountEnv(Environment[CountAction, CountObservation, CountState]):
    """The async flavour: step_async awaits instead of blocking."""

    def __init__(self) -> None:
        self._state = CountState(episode_id="async")

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state = CountState(episode_id=episode_id or "async")
        return CountObservation(echoed="ready", count=0)

    async def step_async(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        if action.sleep_s:
            await asyncio.sleep(action.sleep_s)
        self._state.step_count += 1
        return CountObservation(
            echoed=action.message, count=self._state.step_count, thread=threading.current_thread().name
        )

    @property
    def state(self) -> CountState:
        return self._state


class SingletonEnv(CountEnv):
    SUPPORTS_CONCURRENT_SESSIONS = False


def broken_factory() -> Environment:
    raise RuntimeError("database of levels is missing")
