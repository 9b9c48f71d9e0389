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

Tools: methods decorated with `openenv.tool` become MCP tools of every instance (see
`openenv.mcp`); `after_tool_call` may give a tool call sent as a step its reward.

Rewards: set `self.rubric` (an `openenv.rubrics.Rubric`, one object per instance) and finish
`step` with `return self.apply_rubric(action, observation)`; call `self.reset_rubric()` in
`reset`. The observation then carries the reward and `metadata["reward_components"]`.

Pictures: `render` returns a frame of the current state (a board, the cards, a screen); the
server serves it on request and the `/web` page shows it above one button per legal action.

Tasks: an environment with a natural set of tasks (word lists, problems, levels) overrides
`list_splits` and `list_tasks` (and, when it can do better than a list, `num_tasks`, `get_task`,
`get_task_range`), and takes `split` and `index` in `reset` to play one. The server serves them
as upstream OpenEnv 0.10.0's Task API; an environment without tasks says so (`NoTasksError`).

Snapshots (the "fork" protocol extension): `snapshot()` returns the environment's whole state as a
Python object and `restore(state)` puts it back, so a client can go back to a mid-episode state or
fork it into new sessions. The state never leaves the server (clients hold an id), so it may be any
object. Envs whose state is plain data list the attributes in `SNAPSHOT_ATTRS` and get both methods
for free (deep copies); upstream's names `get_state()` / `set_state(state)` are accepted too. An env
that cannot be snapshotted (a live process) sets `SNAPSHOT_UNSUPPORTED` to say why.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeAlias, TypeVar

from openenv.errors import NoTasksError, SnapshotUnsupportedError
from openenv.rubrics.base import Rubric
from openenv.rubrics.reporting import attach_reward
from openenv.types import Action, EnvironmentMetadata, Observation, State

if TYPE_CHECKING:
    from openenv.mcp.types import CallToolAction, CallToolObservation

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
        SNAPSHOT_ATTRS: instance attributes that hold the whole episode state as plain data
            (lists, dicts, numbers, `random.Random`, copyable objects): `snapshot` / `restore`
            deep-copy them. Empty (the default): override `snapshot` and `restore` instead.
        SNAPSHOT_UNSUPPORTED: why this env cannot be snapshotted (said to clients that ask).

    Attributes:
        rubric: the reward function `apply_rubric` uses (None: no rubric). Give each instance
            its own, since rubrics may keep per-episode state.
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    EXECUTION: ClassVar[Literal["auto", "thread", "inline"]] = "auto"
    SNAPSHOT_ATTRS: ClassVar[tuple[str, ...]] = ()
    SNAPSHOT_UNSUPPORTED: ClassVar[str] = "it does not implement snapshot() and restore()"
    rubric: Rubric | None = None

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

    def render(self) -> Any:
        """A picture of the current state for people watching or playing (optional).

        Return an `openenv.render.Frame`, a str (ANSI or plain text), a ``(media_type, data)``
        pair (PNG, JPEG, SVG or an HTML fragment), a numpy image array, or None (the default:
        no picture). Served on request as the "render" protocol extension; pages show it only
        after `openenv.render.sanitize_frame`, so SVG/HTML may not rely on script or remote files.
        (Upstream 0.10.0's `render_web` is a different hook: HTML from an observation dict.)
        """
        return None

    # -- snapshots (the "fork" extension) --------------------------------------------------------

    def snapshot(self) -> Any:
        """The environment's whole state now, as an object `restore` accepts (optional).

        The server keeps it (clients only see an id) and may restore it many times, into this
        instance or into fresh ones built by the factory: return a copy that later steps cannot
        change. The default copies `SNAPSHOT_ATTRS`, or calls upstream-style `get_state()`.

        Raises:
            SnapshotUnsupportedError: the env cannot be snapshotted (`SNAPSHOT_UNSUPPORTED` says why).
        """
        if self.SNAPSHOT_ATTRS:
            return {name: copy.deepcopy(getattr(self, name)) for name in self.SNAPSHOT_ATTRS}
        get_state = getattr(self, "get_state", None)
        if callable(get_state):
            return get_state()
        raise SnapshotUnsupportedError(f"{type(self).__name__} cannot be snapshotted: {self.SNAPSHOT_UNSUPPORTED}")

    def restore(self, state: Any) -> None:
        """Put back a state `snapshot` returned (on this instance or a fresh one from the factory).

        Must not keep references into `state`: the same snapshot may be restored again later.

        Raises:
            SnapshotUnsupportedError: the env cannot be snapshotted.
        """
        if self.SNAPSHOT_ATTRS:
            for name in self.SNAPSHOT_ATTRS:
                setattr(self, name, copy.deepcopy(state[name]))
            return
        set_state = getattr(self, "set_state", None)
        if callable(set_state):
            set_state(state)
            return
        raise SnapshotUnsupportedError(f"{type(self).__name__} cannot be snapshotted: {self.SNAPSHOT_UNSUPPORTED}")

    @classmethod
    def supports_snapshots(cls) -> bool:
        """Whether instances can be snapshotted and restored (the server then announces "fork")."""
        if cls.SNAPSHOT_ATTRS:
            return True
        if cls.snapshot is not Environment.snapshot and cls.restore is not Environment.restore:
            return True
        return callable(getattr(cls, "get_state", None)) and callable(getattr(cls, "set_state", None))

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Async twin of `reset`; override it instead of `reset` in an asyncio environment."""
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Async twin of `step`; override it instead of `step` in an asyncio environment."""
        return self.step(action, timeout_s=timeout_s, **kwargs)

    # -- rewards ---------------------------------------------------------------------------------

    def apply_rubric(self, action: Any, observation: ObsT) -> ObsT:
        """Score `observation` with `self.rubric` and record the verdict in it.

        Sets `observation.reward` and `observation.metadata["reward_components"]` (and, when an
        episode-level rubric finishes, `metadata["trajectory_rewards"]`). Without a rubric the
        observation is returned unchanged.

        Returns:
            The same observation, so `step` can end with `return self.apply_rubric(action, obs)`.

        Raises:
            RubricError: the rubric is async (use `apply_rubric_async` in `step_async`) or
                returned something that is not a number.
        """
        rubric = self.rubric
        if rubric is None:
            return observation
        return attach_reward(rubric, observation, rubric(action, observation))

    async def apply_rubric_async(self, action: Any, observation: ObsT) -> ObsT:
        """`apply_rubric` for any rubric, sync or async (async parts run concurrently)."""
        rubric = self.rubric
        if rubric is None:
            return observation
        return attach_reward(rubric, observation, await rubric.evaluate(action, observation))

    def reset_rubric(self) -> None:
        """Clear the rubric's per-episode state (trajectories, last scores); call it in `reset`."""
        if self.rubric is not None:
            self.rubric.reset()

    def after_tool_call(self, action: CallToolAction, observation: CallToolObservation) -> CallToolObservation:
        """Adjust the observation of a tool call sent as a step (`CallToolAction`).

        The default returns it unchanged (reward None). Override to reward tool use, e.g.
        `return self.apply_rubric(action, observation)`, or to end the episode. Runs only for
        the step action, not for JSON-RPC `tools/call`. May be an `async def`.
        """
        return observation

    # -- tasks (the Task API) -----------------------------------------------------------------------------

    def list_splits(self) -> list[Any]:
        """The names of the task splits ("train", "test", ...), or entries `{"name", "type"}`.

        Raises:
            NoTasksError: the environment has no tasks (the default).
        """
        raise NoTasksError("list_splits")

    def list_tasks(self, split: str) -> list[Any]:
        """Every task of `split` (JSON-able values: strings, dicts, models).

        Raises:
            KeyError: no such split.  NoTasksError: the environment has no tasks (the default).
        """
        raise NoTasksError("list_tasks")

    def num_tasks(self, split: str) -> int:
        """How many tasks `split` has (default: the length of `list_tasks(split)`)."""
        return len(self.list_tasks(split))

    def get_task(self, split: str, index: int) -> Any:
        """Task `index` of `split` (default: from `list_tasks(split)`).

        Raises:
            IndexError: no task at that index.  KeyError: no such split.
        """
        if index < 0:
            raise IndexError(index)
        return self.list_tasks(split)[index]

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        """Tasks `start` to `stop` of `split`, as a slice (default: from `list_tasks(split)`)."""
        return list(self.list_tasks(split)[start:stop])

    @classmethod
    def has_tasks(cls) -> bool:
        """Whether the class serves tasks (overrides `list_splits`)."""
        return cls.list_splits is not Environment.list_splits

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment for `GET /metadata`. Defaults come from the class."""
        doc = (type(self).__doc__ or "").strip()
        return EnvironmentMetadata(name=type(self).__name__, description=doc.splitlines()[0] if doc else "")

    @classmethod
    def _has_async(cls, name: str) -> bool:
        """Whether the subclass overrides the async twin of method `name`."""
        return getattr(cls, f"{name}_async") is not getattr(Environment, f"{name}_async")


# What the server holds: an environment of any action, observation and state types.
AnyEnvironment: TypeAlias = Environment[Any, Any, Any]
