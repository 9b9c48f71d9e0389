"""RFC 008's statistical level in the Hub's lane (hub_service/pipeline/rfc008_stats.py), on real
servers on 127.0.0.1: the bundled echo and grid envs pass what they can show, and envs built to
break one property each fail exactly the checks about it, with the numbers as evidence.

The envs with a flaw are written here (their openenv.yaml, plans and tiers into a folder, their
server an app of this file served by uvicorn), each flaw chosen by a setting of the app.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import Field

from hub_service.pipeline.rfc008 import hub_report
from hub_service.settings import HubSettings
from openenv import Action, Environment, Observation, State, create_app
from openenv.validation.rfc008 import load_policy, validate_package
from tests.support.servers import ROOT, serve_app

STATISTICAL = [i for i in load_policy().entries if i.startswith("statistical.")]
SETTINGS = HubSettings(statistical_episodes=8, statistical_episode_steps=10, statistical_budget_s=60)


class Say(Action):
    message: str = Field(description="Anything.")


class Heard(Observation):
    text: str = ""


_TURNS: Counter[str] = Counter()
_TURNS_LOCK = threading.Lock()


def trap_app(flaw: str) -> Any:
    """A one-step env whose reward has `flaw`:

    - `gameable`: every answer earns the top reward (1), at every level;
    - `noisy`: the same answer earns 2 and 0 by turns (outside the range, and never the same twice);
    - `sound`: "solve" earns 1, anything else less than 0.5 (by its letters); level 2 pays a tenth;
    - `close`: as `sound`, but level 2 pays four fifths: the tiers differ by less than their spread.
    """

    class Trap(Environment[Say, Heard, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            self._state, self._level = State(episode_id="t"), 1

        def reset(self, seed: int | None = None, episode_id: str | None = None, level: int = 1, **kw: Any) -> Heard:
            self._state, self._level = State(episode_id=episode_id or "t"), level
            return Heard(text="say something", reward=0.0)

        def step(self, action: Say, timeout_s: float | None = None, **kw: Any) -> Heard:
            self._state.step_count += 1
            if flaw == "gameable":
                reward = 1.0
            elif flaw == "slow":
                time.sleep(2.0)  # every reply, well within the per-reply timeout
                reward = 0.5
            elif flaw == "noisy":
                with _TURNS_LOCK:
                    _TURNS[action.message] += 1
                    reward = 2.0 if _TURNS[action.message] % 2 else 0.0
            elif flaw == "close":
                scale = 1.0 if self._level == 1 else 0.8
                reward = 1.0 if action.message == "solve" else sum(map(ord, action.message)) % 50 / 100 * scale
            else:
                reward = 1.0 if action.message == "solve" else sum(map(ord, action.message)) % 50 / 100 / self._level**3
            return Heard(text=action.message, reward=reward, done=True)

        @property
        def state(self) -> State:
            return self._state

    return create_app(Trap, Say, Heard)


def _plan(message: str, episode_id: str) -> dict[str, Any]:
    return {
        "plan_schema_version": "1",
        "reset": {"episode_id": episode_id, "seed": 0},
        "actions": [{"message": message}],
    }


def trap_folder(root: Path, tiers: Any = None) -> Path:
    root.mkdir(parents=True)
    (root / "validation").mkdir()
    (root / "openenv.yaml").write_text(
        "spec_version: 1\nname: trap\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
        "validation:\n"
        "  reward: {range: [0.0, 1.0], oracle_tolerance: 0.0, floor_margin: 0.5}\n"
        "  resources: {cpu: 1.0, memory_mb: 1024, disk_mb: 512, episode_timeout_s: 60.0}\n"
        "  network: {mode: no-network}\n"
        "  capabilities:\n"
        "    verifier: {kind: reward_channel}\n"
        "    oracle: {form: script, location: validation/oracle.json}\n"
        "    canaries: validation/canaries.json\n"
        "  types: {tags: [test]}\n"
    )
    (root / "validation" / "oracle.json").write_text(json.dumps(_plan("solve", "trap-oracle")))
    (root / "validation" / "canaries.json").write_text(json.dumps({"canaries": [_plan("", "trap-silent")]}))
    if tiers is not None:
        text = tiers if isinstance(tiers, str) else json.dumps(tiers)
        (root / "validation" / "difficulty.json").write_text(text)
    return root


TIERS = {"tiers": [{"name": "one", "options": {"level": 1}}, {"name": "two", "options": {"level": 2}}]}


def _statistical(folder: Path, url: str, settings: HubSettings = SETTINGS) -> dict[str, dict[str, Any]]:
    """The Hub's report of the server at `url` (as its smoke stage makes it): the seven results."""
    _, legacy = validate_package(folder, import_app=False)
    schema = httpx.get(url + "/schema", timeout=30).json()["action"]
    report = hub_report(
        folder, legacy.model_dump(mode="json"), None, "local/trap", url,
        first_work_s=1.0, settings=settings, action_schema=schema,
    )  # fmt: skip
    assert 4 in report["levels_run"]
    results = {r["check_id"]: r for r in report["results"] if r["check_id"].startswith("statistical.")}
    assert sorted(results) == sorted(STATISTICAL)
    return results


def _statuses(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {k.removeprefix("statistical."): r["status"] for k, r in results.items()}


def test_a_sound_reward_passes_every_statistical_check(tmp_path: Path) -> None:
    folder = trap_folder(tmp_path / "trap", TIERS)
    with serve_app(trap_app("sound")) as url:
        results = _statistical(folder, url)
    assert set(_statuses(results).values()) == {"pass"}, results
    sep = results["statistical.difficulty_separation"]["measured"]["tiers"]
    assert sep["one"]["n"] == sep["two"]["n"] == 8 and sep["one"]["ci95"][0] > sep["two"]["ci95"][1]
    assert results["statistical.reward_reachability"]["measured"]["reached"] == 8


def test_a_reward_any_answer_earns_fails_the_checks_about_gaming(tmp_path: Path) -> None:
    folder = trap_folder(tmp_path / "trap", TIERS)
    with serve_app(trap_app("gameable")) as url:
        results = _statistical(folder, url)
    assert _statuses(results) == {
        "reward_reachability": "pass",
        "difficulty_separation": "fail",  # every level pays 1
        "headroom": "fail",  # random answers earn the top
        "variance_bound": "pass",
        "training_signal": "fail",  # one reward for everything: nothing to learn from
        "adversarial_floor": "fail",  # the silent canary and the empty answer earn 1
        "gameability_gap": "fail",
    }
    floor = results["statistical.adversarial_floor"]
    assert floor["measured"]["policies"]["empty"]["mean"] == 1.0 and floor["remediation"]
    assert "is not easier than" in results["statistical.difficulty_separation"]["evidence"][0]


def test_what_the_episodes_cannot_tell_says_skip_not_fail(tmp_path: Path) -> None:
    """Two tiers whose random rewards differ by less than their spread: over 8 episodes their
    intervals overlap, which shows the Hub played too few episodes to tell them apart, not that
    the env is wrong. The check says skip, and what would decide it."""
    folder = trap_folder(tmp_path / "trap", TIERS)
    with serve_app(trap_app("close")) as url:
        results = _statistical(folder, url)
    separation = results["statistical.difficulty_separation"]
    assert separation["status"] == "skip", separation
    assert "overlap" in separation["evidence"][0] and "statistical_episodes" in separation["evidence"][-1]
    one, two = (separation["measured"]["tiers"][t]["ci95"] for t in ("one", "two"))
    assert one[0] <= two[1] and two[0] < one[1], (one, two)  # neither above the other
    assert separation["remediation"]
    assert _statuses(results)["headroom"] == "pass"  # random play is well below the top: decided


def test_a_noisy_reward_fails_reachability_and_the_variance_bound(tmp_path: Path) -> None:
    folder = trap_folder(tmp_path / "trap")
    with serve_app(trap_app("noisy")) as url:
        results = _statistical(folder, url, SETTINGS.model_copy(update={"statistical_episodes": 16}))
    statuses = _statuses(results)
    assert statuses["variance_bound"] == "fail" and statuses["reward_reachability"] == "fail", results
    variance = results["statistical.variance_bound"]["measured"]
    assert variance["variance"] == pytest.approx(8 / 7) and variance["tolerance"] == 0.2 and variance["replays"] == 8
    assert results["statistical.reward_reachability"]["measured"]["reached"] == 4
    assert results["statistical.reward_reachability"]["measured"]["outside"]  # rewards above the declared top
    assert statuses["difficulty_separation"] == "skip"  # no tiers declared: said, never passed
    assert "validation/difficulty.json" in results["statistical.difficulty_separation"]["evidence"][0]


def test_what_cannot_be_decided_says_skip_and_why(tmp_path: Path) -> None:
    """A budget too small for the episodes, a tiers file that is not one, the level turned off."""
    folder = trap_folder(tmp_path / "trap", '{"tiers": "easy"}')
    with serve_app(trap_app("sound")) as url:
        starved = _statistical(folder, url, SETTINGS.model_copy(update={"statistical_budget_s": 0.001}))
        off = _statistical(folder, url, SETTINGS.model_copy(update={"statistical_episodes": 0}))
    assert starved["statistical.difficulty_separation"]["status"] == "fail"  # the broken file, named
    assert "validation/difficulty.json is not" in starved["statistical.difficulty_separation"]["evidence"][0]
    for check in ("headroom", "training_signal", "gameability_gap", "adversarial_floor", "variance_bound"):
        result = starved[f"statistical.{check}"]
        assert result["status"] == "skip", result
        assert "ran out" in result["evidence"][0] or "replays" in result["evidence"][0], result
    assert {r["status"] for r in off.values()} == {"skip"}
    assert all("statistical_episodes is 0" in r["evidence"][0] for r in off.values())


@pytest.mark.parametrize("env", ["echo_env", "grid_world_env"])
def test_bundled_envs_pass_the_statistical_level(env: str) -> None:
    """echo_env and grid_world_env (which declares difficulty tiers), with the Hub's settings."""
    from openenv.validation.local import serve_folder

    folder = ROOT / "envs" / env
    _, legacy = validate_package(folder)
    with serve_folder(folder, legacy, python=None, timeout_s=60) as url:
        results = _statistical(folder, url, HubSettings())  # the Hub's own settings
    expected = {k.removeprefix("statistical."): "pass" for k in STATISTICAL}
    if env == "echo_env":
        expected["difficulty_separation"] = "skip"
    assert _statuses(results) == expected, results


def test_a_server_that_drags_out_its_replies_cannot_stretch_the_level_past_its_budget(tmp_path: Path) -> None:
    """Episodes under way when the budget ends are cut there (each reply alone is within its
    timeout); the checks short of episodes say so. A tiers file naming more tiers than are
    compared is refused by name."""
    from hub_service.pipeline.rfc008_stats import gather, statistical_results
    from openenv.validation.report import Report
    from openenv.validation.rfc008 import Level
    from openenv.validation.rfc008.runtime import RuntimeSubject

    many = {"tiers": [{"name": f"t{i}", "options": {"level": i + 1}} for i in range(9)]}
    folder = trap_folder(tmp_path / "trap", many)
    report, _ = validate_package(folder, import_app=False)
    policy = load_policy()
    with serve_app(trap_app("slow")) as url:
        subject = RuntimeSubject(url, folder, report.manifest, Report(), policy, Level.STATISTICAL, timeout_s=10)
        began = time.monotonic()
        run = asyncio.run(
            gather(
                subject,
                {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
                episodes=8,
                episode_steps=5,
                budget_s=1.0,
            )
        )
        took = time.monotonic() - began
    assert took < 4.0 and run.out_of_time, took  # not 8 episodes x 2 s x 5 policies
    results = {r.check_id: r for r in statistical_results(run, report.manifest, policy.bounds)}
    assert results["statistical.headroom"].status == "skip" and "ran out" in results["statistical.headroom"].evidence[0]
    separation = results["statistical.difficulty_separation"]
    assert separation.status == "fail" and "from 2 to 8" in separation.evidence[0]
