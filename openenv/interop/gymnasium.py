"""Any registered Gymnasium id served as an OpenEnv environment (`openenv import ID` writes a folder
that uses this module; it needs `gymnasium`, and the package that registers the id).

How spaces travel as JSON (`to_json` for observations, `from_json` for actions):

| space | JSON |
|---|---|
| `Discrete(n, start)` | an integer from `start` to `start + n - 1` |
| `Box` | numbers (booleans for a bool box) nested in lists as its shape is; a number for shape `()`; as an observation, an image (uint8, H×W or H×W×1/3/4, both sides 32 or more) is a base64 PNG |
| `MultiBinary`, `MultiDiscrete` | integers nested in lists as its shape is |
| `Text` | a string |
| `Dict` | an object, key by key |
| `Tuple` | an array, item by item |

Other spaces (`Graph`, `Sequence`, `OneOf`, a package's own) raise `ConfigurationError` naming the
space and where it sits (`check_space`).
"""

from __future__ import annotations

import base64
import importlib
import math
import os
import uuid
from typing import Any, ClassVar, Generic

import gymnasium
import numpy as np
from gymnasium import spaces

from openenv.env import ActT, Environment, ObsT, StateT
from openenv.errors import ConfigurationError
from openenv.render import as_frame

__all__ = [
    "NAMESPACE_MODULES",
    "GymnasiumEnvironment",
    "check_space",
    "from_json",
    "is_image",
    "jsonable",
    "load_spec",
    "to_json",
]

# Namespaces of ids whose package registers them when imported (Gymnasium 1.x has no plugins).
NAMESPACE_MODULES = {"ALE": "ale_py"}
_MIN_IMAGE_SIDE = 32


def load_spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """The registry's entry for `env_id` (`module:Id` imports `module` first, as `gymnasium.make`
    does; an `ALE/...` id imports ale_py).

    Raises:
        gymnasium.error.Error: the id is not registered (the message suggests near ones).
        ImportError: the package that registers it cannot be imported.
    """
    # Served headless: pygame (which draws Gymnasium's pictures) would otherwise look for a display
    # and a sound server, and print an error when it finds none.
    for driver in ("SDL_VIDEODRIVER", "SDL_AUDIODRIVER"):
        os.environ.setdefault(driver, "dummy")
    module, _, name = env_id.rpartition(":")
    namespace = name.split("/")[0] if "/" in name else ""
    module = module or NAMESPACE_MODULES.get(namespace, "")
    if module:
        importlib.import_module(module)
    return gymnasium.spec(name)


def is_image(space: spaces.Space[Any]) -> bool:
    """Whether an observation space is a picture (sent as a base64 PNG rather than nested lists)."""
    if not isinstance(space, spaces.Box) or space.dtype != np.uint8:
        return False
    shape = space.shape
    sides_ok = len(shape) >= 2 and min(shape[:2]) >= _MIN_IMAGE_SIDE
    return sides_ok and (len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3, 4)))


def check_space(space: spaces.Space[Any], where: str) -> None:
    """Refuse a space that has no JSON form here.

    Raises:
        ConfigurationError: names the space, where it sits (e.g. `observation["map"]`) and what maps.
    """
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"the {where} space {space} has a key that is not a string: {key!r}")
            check_space(sub, f"{where}[{key!r}]")
    elif isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            check_space(sub, f"{where}[{i}]")
    elif not isinstance(space, (spaces.Discrete, spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete, spaces.Text)):
        raise ConfigurationError(
            f"the {where} space {space} ({type(space).__name__}) has no JSON form here; "
            "Discrete, Box, MultiBinary, MultiDiscrete, Text, and Dict or Tuple of them map"
        )


def to_json(space: spaces.Space[Any], value: Any, *, pictures: bool = True) -> Any:
    """A value of `space` as JSON-ready Python; with `pictures` (observations), image boxes as PNG."""
    if isinstance(space, spaces.Discrete):
        return int(value)
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Dict):
        return {key: to_json(sub, value[key], pictures=pictures) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [to_json(sub, item, pictures=pictures) for sub, item in zip(space.spaces, value, strict=True)]
    array = np.asarray(value)
    if pictures and is_image(space):
        frame = as_frame(array[:, :, 0] if array.ndim == 3 and array.shape[2] == 1 else array)
        assert frame is not None
        return base64.b64encode(frame.data).decode("ascii")
    return array.tolist()


def from_json(space: spaces.Space[Any], data: Any) -> Any:
    """An action sent as JSON, as a value of `space`.

    Raises:
        ValueError: the value is not in the space (the message shows the space).
    """
    try:
        value = _from_json(space, data)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise ValueError(f"{data!r} is not in the action space {space}: {exc}") from None
    if isinstance(space, spaces.Discrete):  # the common case, checked without `contains`'s numpy calls
        if not space.start <= value < space.start + space.n:
            raise ValueError(f"{data!r} is not in the action space {space}")
    elif not space.contains(value):
        raise ValueError(f"{data!r} is not in the action space {space}")
    return value


def _from_json(space: spaces.Space[Any], data: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        return np.int64(data)
    if isinstance(space, spaces.Text):
        return str(data)
    if isinstance(space, spaces.Dict):
        return {key: _from_json(sub, data[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_from_json(sub, item) for sub, item in zip(space.spaces, data, strict=True))
    assert isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete))
    return np.asarray(data, dtype=space.dtype).reshape(space.shape)


def jsonable(value: Any) -> Any:
    """An `info` dict's value as JSON-ready Python: numpy values as numbers and lists, mappings and
    sequences item by item, non-finite floats as None, anything else as its repr."""
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return repr(value)


class GymnasiumEnvironment(Environment[ActT, ObsT, StateT], Generic[ActT, ObsT, StateT]):
    """One Gymnasium environment per session, its spaces mapped to the models below.

    A subclass names the id and the models (`openenv import` writes one):

        class CartpoleEnvironment(GymnasiumEnvironment[CartpoleAction, CartpoleObservation, CartpoleState]):
            GYMNASIUM_ID = "CartPole-v1"
            ACTION, OBSERVATION, STATE = CartpoleAction, CartpoleObservation, CartpoleState

    The action model has one field, `action`; the observation model has `observation`,
    `truncated` and `info`; the state model has `env_id`, `seed`, `total_reward`. Reset options
    other than `seed` and `episode_id` go to Gymnasium's `reset(options=...)`.

    Class attributes:
        GYMNASIUM_ID: the registered id (`module:Id` imports `module` first).
        MAKE_KWARGS: keyword arguments for `gymnasium.make`.
        RENDER: whether to make the env with `render_mode="rgb_array"` (its picture is `render()`).
    """

    GYMNASIUM_ID: ClassVar[str] = ""
    MAKE_KWARGS: ClassVar[dict[str, Any]] = {}
    RENDER: ClassVar[bool] = False
    ACTION: ClassVar[type[Any]]
    OBSERVATION: ClassVar[type[Any]]
    STATE: ClassVar[type[Any]]
    SUPPORTS_CONCURRENT_SESSIONS = True  # each session makes its own Gymnasium env

    def __init__(self) -> None:
        load_spec(self.GYMNASIUM_ID)
        kwargs = {**self.MAKE_KWARGS, **({"render_mode": "rgb_array"} if self.RENDER else {})}
        self._env = gymnasium.make(self.GYMNASIUM_ID.rpartition(":")[2], **kwargs)
        # Read once: each read walks the wrapper chain, and a step would read them twice.
        self._observation_space = self._env.observation_space
        self._action_space = self._env.action_space
        check_space(self._observation_space, "observation")
        check_space(self._action_space, "action")
        self._episode_id = str(uuid.uuid4())
        self._seed: int | None = None
        self._steps = 0
        self._total = 0.0
        self._done = True
        self._started = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start an episode: Gymnasium's `reset(seed=seed, options=kwargs or None)`."""
        observation, info = self._env.reset(seed=seed, options=kwargs or None)
        self._episode_id = episode_id or str(uuid.uuid4())
        self._seed, self._steps, self._total, self._done, self._started = seed, 0, 0.0, False, True
        return self._observe(observation, info, None, truncated=False)

    def step(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Gymnasium's `step` with the action's `action` field; done is terminated or truncated.

        Raises:
            RuntimeError: no episode is running (none started, or it ended); call reset().
            ValueError: the action is not in the action space.
        """
        if self._done:
            raise RuntimeError("no episode is running (none started, or it ended); call reset()")
        value = from_json(self._action_space, action.model_dump(mode="json", by_alias=True)["action"])
        observation, reward, terminated, truncated, info = self._env.step(value)
        self._steps += 1
        self._total += float(reward)
        self._done = bool(terminated or truncated)
        return self._observe(observation, info, float(reward), truncated=bool(truncated))

    @property
    def state(self) -> StateT:
        state: StateT = self.STATE(
            episode_id=self._episode_id,
            step_count=self._steps,
            env_id=self.GYMNASIUM_ID,
            seed=self._seed,
            total_reward=self._total,
        )
        return state

    def render(self) -> Any:
        """The env's `rgb_array` picture (None when it has none, or before the first reset)."""
        return self._env.render() if self.RENDER and self._started else None

    def close(self) -> None:
        self._env.close()

    def _observe(self, observation: Any, info: dict[str, Any], reward: float | None, *, truncated: bool) -> ObsT:
        made: ObsT = self.OBSERVATION(
            observation=to_json(self._observation_space, observation),
            truncated=truncated,
            info=jsonable(info) if info else {},
            reward=reward,
            done=self._done,
        )
        return made
