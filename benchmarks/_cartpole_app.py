"""CartPole written by hand as an OpenEnv env: the contestant `benchmarks/imported_steps.py` sets
beside the same game imported from Gymnasium (`openenv import CartPole-v1`).

The classic cart-and-pole dynamics (Barto, Sutton and Anderson, 1983) in plain Python, with the
constants and rules of Gymnasium's `CartPole-v1`: a push left (0) or right (1) of 10 N, Euler
steps of 0.02 s, reward 1 per step, the episode ends when the cart leaves ±2.4 or the pole tilts
past 12°, and is cut at 500 steps. The models have the shape `openenv import` gives the imported
one (`action`; `observation`, `truncated`, `info`), so one client drives both alike.

    python -m openenv.server _cartpole_app:app      # from benchmarks/
"""

from __future__ import annotations

import math
import random
import uuid
from typing import Any

from pydantic import Field

from openenv import Action, Environment, Observation, State, create_app

GRAVITY = 9.8
CART_MASS = 1.0
POLE_MASS = 0.1
HALF_POLE = 0.5  # metres, from the pivot to the pole's centre
PUSH = 10.0
DT = 0.02
X_LIMIT = 2.4
ANGLE_LIMIT = 12 * 2 * math.pi / 360
MAX_STEPS = 500


class CartPoleAction(Action):
    action: int = Field(ge=0, le=1, description="0 pushes the cart left, 1 right")


class CartPoleObservation(Observation):
    observation: list[float] = Field(description="cart position, cart velocity, pole angle, pole angular velocity")
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class CartPoleState(State):
    seed: int | None = None
    total_reward: float = 0.0


class CartPoleEnvironment(Environment[CartPoleAction, CartPoleObservation, CartPoleState]):
    """One cart and pole per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._x = self._v = self._theta = self._omega = 0.0
        self._steps, self._total = 0, 0.0
        self._seed: int | None = None
        self._episode_id = str(uuid.uuid4())
        self._done = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CartPoleObservation:
        rng = random.Random(seed)
        self._x, self._v, self._theta, self._omega = (rng.uniform(-0.05, 0.05) for _ in range(4))
        self._steps, self._total, self._seed, self._done = 0, 0.0, seed, False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(None, truncated=False)

    def step(self, action: CartPoleAction, timeout_s: float | None = None, **kwargs: Any) -> CartPoleObservation:
        if self._done:
            raise RuntimeError("no episode is running (none started, or it ended); call reset()")
        force = PUSH if action.action == 1 else -PUSH
        cos, sin = math.cos(self._theta), math.sin(self._theta)
        total_mass = CART_MASS + POLE_MASS
        pole_moment = POLE_MASS * HALF_POLE
        lean = (force + pole_moment * self._omega**2 * sin) / total_mass
        alpha = (GRAVITY * sin - cos * lean) / (HALF_POLE * (4.0 / 3.0 - POLE_MASS * cos**2 / total_mass))
        accel = lean - pole_moment * alpha * cos / total_mass
        self._x += DT * self._v
        self._v += DT * accel
        self._theta += DT * self._omega
        self._omega += DT * alpha
        self._steps += 1
        self._total += 1.0
        fallen = abs(self._x) > X_LIMIT or abs(self._theta) > ANGLE_LIMIT
        truncated = not fallen and self._steps >= MAX_STEPS
        self._done = fallen or truncated
        return self._observe(1.0, truncated=truncated)

    @property
    def state(self) -> CartPoleState:
        return CartPoleState(
            episode_id=self._episode_id, step_count=self._steps, seed=self._seed, total_reward=self._total
        )

    def _observe(self, reward: float | None, *, truncated: bool) -> CartPoleObservation:
        return CartPoleObservation(
            observation=[self._x, self._v, self._theta, self._omega],
            truncated=truncated,
            reward=reward,
            done=self._done,
        )


app = create_app(CartPoleEnvironment, CartPoleAction, CartPoleObservation, env_name="cartpole_by_hand")
