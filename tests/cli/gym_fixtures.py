"""Gymnasium ids for the import tests, registered when this module is imported
(`openenv import tests.cli.gym_fixtures:Id` imports it first, as `gymnasium.make` does)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces


class GraphEnv(gymnasium.Env[Any, int]):
    """An env whose observation is a Graph: no JSON form here."""

    observation_space = spaces.Graph(node_space=spaces.Discrete(3), edge_space=None)
    action_space = spaces.Discrete(2)


class DictEnv(gymnasium.Env[dict[str, Any], dict[str, Any]]):
    """Every mappable space at once: the observation echoes the action and counts steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "name": spaces.Text(8),
                "keys": spaces.MultiDiscrete([3, 3]),
                "flags": spaces.MultiBinary(3),
                "odd-key": spaces.Discrete(5),
                "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 9, (), np.int64))),
            }
        )
        self.action_space = spaces.Dict(
            {
                "move": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "say": spaces.Text(8),
                "press": spaces.MultiDiscrete([3, 3]),
            }
        )
        self._steps = 0

    def _obs(self, move: Any, say: str, press: Any) -> dict[str, Any]:
        return {
            "pos": np.asarray(move, dtype=np.float32),
            "name": say,
            "keys": np.asarray(press, dtype=np.int64),
            "flags": np.array([1, 0, self._steps % 2], dtype=np.int8),
            "odd-key": self._steps % 5,
            "pair": (self._steps % 2, np.array(self._steps, dtype=np.int64)),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._steps = 0
        return self._obs([0.0, 0.0], "start", [0, 0]), {"level": np.int64(1)}

    def step(self, action: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        reward = float(np.sum(action["move"]))
        return self._obs(action["move"], action["say"], action["press"]), reward, self._steps >= 3, False, {}


gymnasium.register("OpenEnvTests/Graph-v0", entry_point=GraphEnv)
gymnasium.register("OpenEnvTests/Dict-v0", entry_point=DictEnv)
gymnasium.register("OpenEnvTests/BrokenImport-v0", entry_point="openenv_tests_no_such_module:MissingEnv")
