"""The Hub's fork check against real servers on 127.0.0.1: a bundled env earns "forkable", an env
whose snapshot forgets its RNG is caught at its first step and field, one without the extension
is "not_offered"; and the catalog turns the verdict into the badge."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from blackjack_env.models import BlackjackAction
from blackjack_env.server.app import app as blackjack_app

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict, badges
from hub_service.pipeline.trust import TrustContext
from hub_service.pipeline.trust_fork import fork_check
from openenv import Action, Environment, Observation, State, create_app
from tests.runtime.envs import CountAction, CountEnv, CountObservation
from tests.support.servers import serve_app


class DrawAction(Action):
    pick: int = 0


class DrawObservation(Observation):
    value: float
    count: int


class ForgetsRng(Environment[DrawAction, DrawObservation, State]):
    """Its snapshot keeps the count but not the RNG: a restored future differs."""

    SNAPSHOT_ATTRS = ("_count",)

    def __init__(self) -> None:
        self._rng = random.Random(0)
        self._count = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> DrawObservation:
        self._rng, self._count = random.Random(seed), 0
        return DrawObservation(value=0.0, count=0)

    def step(self, action: DrawAction, timeout_s: float | None = None, **kwargs: Any) -> DrawObservation:
        self._count += 1
        return DrawObservation(value=round(self._rng.random(), 6), count=self._count, reward=0.0)

    @property
    def state(self) -> State:
        return State(step_count=self._count)


def _ctx(url: str, action_cls: type[Action]) -> TrustContext:
    settings = SimpleNamespace(
        step_timeout_s=10.0, smoke_message_max_mb=8.0, determinism_steps=8, trust_release_grace_s=5.0
    )
    declared = SimpleNamespace(varying_fields=(), stochastic=False)
    return TrustContext(
        settings=settings,  # type: ignore[arg-type]
        url=url,
        provider=None,
        action_schema=action_cls.model_json_schema(),
        declared=declared,
        image_ref=None,
        figures={},
        log=lambda _: None,
    )


async def test_blackjack_is_forkable() -> None:
    with serve_app(blackjack_app) as url:
        result = await fork_check(_ctx(url, BlackjackAction))
    assert result["verdict"] == "forkable" and result["first_difference"] is None
    assert result["steps"] >= 1 and 0 <= result["prefix_steps"] <= 4


async def test_a_snapshot_that_forgets_its_rng_is_caught_at_its_first_difference() -> None:
    with serve_app(create_app(ForgetsRng, DrawAction, DrawObservation)) as url:
        result = await fork_check(_ctx(url, DrawAction))
    assert result["verdict"] == "not_forkable"
    diff = result["first_difference"]
    assert diff["step"] == 0 and diff["field"] == "observation.value" and diff["replay"] == "second restore"
    assert diff["first"] != diff["second"] and result["differing_fields"] == ["observation.value"]


async def test_an_env_without_the_extension_is_not_offered() -> None:
    with serve_app(create_app(CountEnv, CountAction, CountObservation)) as url:
        result = await fork_check(_ctx(url, CountAction))
    assert result["verdict"] == "not_offered"


@pytest.mark.parametrize(
    ("fork", "flag", "badge"),
    [
        ({"verdict": "forkable"}, True, True),
        ({"verdict": "not_forkable"}, False, False),
        ({"verdict": "not_offered"}, None, False),
        ({"verdict": "unchecked", "reason": "x"}, None, False),
        (None, None, False),
    ],
)
def test_the_catalog_badge_follows_the_verdict(fork: dict[str, Any] | None, flag: bool | None, badge: bool) -> None:
    env = EnvRecord(owner="o", name="e")
    determinism = {"verdict": "deterministic", **({"fork": fork} if fork else {})}
    version = EnvVersion(id=1, ref="main", state="passed", determinism=determinism)
    apply_verdict(env, version)
    assert env.forkable is flag
    assert ("forkable" in badges(env)) is badge
