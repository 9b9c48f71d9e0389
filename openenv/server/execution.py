"""Running an environment's methods: on the event loop, or in one shared worker pool.

See `openenv.env` for the `EXECUTION` modes. The "auto" policy is kept per (class, method),
because a fast `step` says nothing about `reset` or the factory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import gc
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from openenv.errors import EnvStepTimeout

__all__ = ["Executor", "FullCollections"]

log = logging.getLogger("openenv.server")

T = TypeVar("T")

_FAST_S = 0.001  # a call under this is cheap enough to run on the loop
_SLOW_S = 0.010  # an inline call over this is a strike against running inline
_STALL_S = 0.100  # an inline call over this goes back to the pool at once
_STRIKES = 2  # slow inline calls (with fewer than _PROMOTE_AFTER fast ones between) before going back
_PROMOTE_AFTER = 64  # fast calls in the pool (net of slow ones) before a method runs inline
_GRACE_S = 0.5  # how long past a client's timeout_s we keep waiting


class FullCollections:
    """How many full (oldest-generation) garbage collections the interpreter has started.

    A full collection can pause every thread for tens of milliseconds in a big process. A call
    it fell in says nothing about the call itself, so the "auto" policy ignores such a call.
    """

    count = 0


def _count_full_collections(phase: str, info: dict[str, int]) -> None:
    if phase == "start" and info["generation"] == 2:  # CPython's oldest generation
        FullCollections.count += 1


gc.callbacks.append(_count_full_collections)


class _Policy:
    """Where calls of one method go. `inline` flips as the "auto" mode learns.

    One slow call is not a verdict: on a loaded machine the OS can pause a fast call for a
    few milliseconds. A method goes back to the pool after `_STRIKES` slow inline calls close
    together, or one that stalls the loop past `_STALL_S`. In the pool, a call that took long
    on the wall clock but little CPU (under `_FAST_S`) and stayed under `_SLOW_S` is no evidence
    either way: its worker waited for the CPU or for the GIL (held by the loop while it serves
    other sessions), or for I/O briefly, and an inline call that short is kept inline anyway. A
    call that used the CPU, or blocked past `_SLOW_S`, halves the promotion streak.
    """

    __slots__ = ("clean", "inline", "name", "streak", "strikes", "warned")

    def __init__(self, inline: bool) -> None:
        self.inline = inline
        self.streak = 0  # -1 for a "thread"-mode method: never promoted
        self.strikes = 0
        self.clean = 0  # fast inline calls since the last strike
        self.warned = False
        self.name = ""

    def after_pool(self, elapsed: float, cpu: float, collections: int) -> None:
        """Record a pool call's wall-clock and CPU seconds; a run of fast ones promotes it.

        `collections` is `FullCollections.count` from before the call.
        """
        if self.streak < 0 or collections != FullCollections.count:
            return
        if elapsed < _FAST_S:
            self.streak += 1
            if self.streak >= _PROMOTE_AFTER:
                self.inline = True
        elif cpu >= _FAST_S or elapsed > _SLOW_S:
            self.streak //= 2

    def after_inline(self, elapsed: float, collections: int) -> None:
        """Record an inline call's duration; slow ones send the method back to the pool.

        `collections` is `FullCollections.count` from before the call.
        """
        if self.streak < 0 or collections != FullCollections.count:
            return
        if elapsed <= _SLOW_S:
            self.clean += 1
            if self.clean >= _PROMOTE_AFTER:
                self.strikes = self.clean = 0
            return
        self.strikes += 1
        self.clean = 0
        if elapsed > _STALL_S or self.strikes >= _STRIKES:
            self.inline = False
            self.streak = self.strikes = 0
            if not self.warned:
                self.warned = True
                log.info("%s took %.1f ms; running it in the worker pool from now on", self.name, elapsed * 1e3)


class Executor:
    """Runs sync callables inline or in a bounded pool, per the class's EXECUTION mode."""

    def __init__(self, max_threads: int) -> None:
        self._max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._policies: dict[tuple[type, str], _Policy] = {}
        # Calls that ran past their timeout and still run in a worker, by id of the object whose
        # method it is (the env): a snapshot or restore meanwhile would race them.
        self._late: dict[int, concurrent.futures.Future[Any]] = {}

    def running_late(self, obj: object) -> bool:
        """Whether a timed-out call of one of `obj`'s methods still runs in a worker thread."""
        work = self._late.get(id(obj))
        if work is None:
            return False
        if work.done():
            del self._late[id(obj)]
            return False
        return True

    def policy(self, owner: type, name: str) -> _Policy:
        """The (mutable) execution policy of `owner.name`; hot paths may cache it."""
        key = (owner, name)
        policy = self._policies.get(key)
        if policy is None:
            mode = getattr(owner, "EXECUTION", "auto")
            if mode not in ("auto", "thread", "inline"):
                raise ValueError(f"{owner.__name__}.EXECUTION must be 'auto', 'thread' or 'inline', not {mode!r}")
            policy = self._policies[key] = _Policy(inline=mode == "inline")
            policy.streak = -1 if mode == "thread" else 0  # -1: never promote
            policy.name = f"{owner.__name__}.{name}"
        return policy

    @property
    def thread_count(self) -> int:
        """Threads the pool has started so far (never more than `max_threads`)."""
        return len(self._pool._threads) if self._pool is not None else 0

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._max_threads, thread_name_prefix="openenv-env")
        return self._pool

    async def run(
        self,
        owner: type,
        name: str,
        fn: Callable[..., T],
        *args: Any,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> T:
        """Call `fn(*args, **kwargs)` where the policy for `owner.name` says.

        Raises:
            EnvStepTimeout: the call did not finish within `timeout_s` (+ a short grace).
        """
        return await self.call(self.policy(owner, name), fn, args, kwargs, timeout_s)

    async def call(
        self,
        policy: _Policy,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout_s: float | None,
    ) -> T:
        """Call `fn` inline or in the pool, as `policy` says (the form for cached policies)."""
        if policy.inline and timeout_s is None:
            collections, start = FullCollections.count, time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                policy.after_inline(time.perf_counter() - start, collections)
        return await self.in_pool(policy, fn, args, kwargs, timeout_s)

    async def in_pool(
        self,
        policy: _Policy,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout_s: float | None,
        grace_s: float = _GRACE_S,
    ) -> T:
        """Call `fn` in the pool; wait at most `timeout_s + grace_s` when a timeout is given.

        Raises:
            EnvStepTimeout: the call ran past its time. The worker thread cannot be stopped, so
                the call finishes in the background and its result is dropped.
        """
        ctx = contextvars.copy_context()
        collections = FullCollections.count
        timed = functools.partial(_timed, ctx.run, fn, args, kwargs)
        work = self.pool.submit(timed)
        fut = asyncio.wrap_future(work)
        if timeout_s is None:
            result, elapsed, cpu = await fut
        else:
            try:
                result, elapsed, cpu = await asyncio.wait_for(fut, timeout_s + grace_s)
            except TimeoutError:
                owner = getattr(fn, "__self__", None)
                if owner is not None and not work.done():  # still running: restores must wait for it
                    self._late[id(owner)] = work
                raise EnvStepTimeout(f"the call did not finish within timeout_s={timeout_s:g}") from None
        policy.after_pool(elapsed, cpu, collections)
        return result

    async def run_async(self, coro: Any, timeout_s: float | None) -> Any:
        """Await an env coroutine, with the same timeout rule as sync calls."""
        if timeout_s is None:
            return await coro
        try:
            return await asyncio.wait_for(coro, timeout_s + _GRACE_S)
        except TimeoutError:
            raise EnvStepTimeout(f"the call did not finish within timeout_s={timeout_s:g}") from None

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _timed(
    run: Callable[..., Any], fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[T, float, float]:
    """`fn`'s result, its wall-clock seconds and this worker thread's CPU seconds in it."""
    start, cpu = time.perf_counter(), time.thread_time()
    result = run(fn, *args, **kwargs)
    return result, time.perf_counter() - start, time.thread_time() - cpu
