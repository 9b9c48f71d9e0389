"""Trust signals for real: the smoke stage's capacity card, determinism check and reward check,
run through the pipeline on envs with a known flaw (tests/hub/envs), and on the bundled envs.

Each flawed env passes its smoke test (the checks never fail it) and is flagged in the stored
version and in the catalog's filterable verdicts; echo_env gets a clean bill, and no random baseline:
its messages are free-form text. coin_flip's closed action (a bool) gets a baseline row.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from hub_service.catalog.models import EnvRecord
from hub_service.catalog.stage_runs import StageRun
from hub_service.evals.models import Eval
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.pipeline import stages
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from openenv.declared import read_declared
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.support.servers import ROOT

pytestmark = [pytest.mark.slow]

TRUST_ON = {"determinism_check": True, "reward_check": True, "capacity_check": True}  # off in hub_settings


def _records(factory) -> dict[str, EnvRecord]:
    with factory() as s:
        return {e.name: e for e in s.scalars(select(EnvRecord))}


def test_each_flaw_is_flagged_and_echo_passes_every_check(clean_factory, hub_settings: HubSettings) -> None:
    # The flawed envs' `validation:` blocks declare a reward range and nothing else, which RFC 008's
    # static level fails: with its gate on (the default) they would stop at validate, before the trust
    # checks this test is about (tests/hub/test_rfc008_gate.py is the gate's).
    settings = hub_settings.model_copy(update={**TRUST_ON, "builder": "process", "rfc008_gate": "off"})
    names = ("echo_env", "ignores_seed", "empty_answer_max", "leaks_sessions", "coin_flip")
    index_source(clean_factory, LocalSource(make_envs(Path(settings.local_source), *names), trusted=True))
    assert Worker(settings, clean_factory).run_until_idle() == ["passed"] * len(names)  # no check fails a smoke test
    v, records = verdicts(clean_factory), _records(clean_factory)

    echo = v["echo_env"]
    card = echo.capacity
    assert card["cold_start_s"] == echo.cold_start_s and card["step_p50_ms"] == echo.step_p50_ms
    assert card["image_size_mb"] is None  # a process has no image
    assert 10 < card["server_base_mb"] < 1000  # a Python server's resident memory
    assert 0 <= card["idle_session_mb"] < 1 and 0 <= card["active_session_mb"] < 1  # an echo session is tiny
    assert card["sessions_held"] >= 8 and card["ramp"][0]["sessions"] == 1
    assert all(level["errors"] == 0 for level in card["ramp"])
    assert echo.determinism["verdict"] == "deterministic" and echo.determinism["first_difference"] is None
    reward = echo.reward_check
    assert reward["verdict"] == "ok" and reward["flags"] == []
    # echo rewards 0.1 a character up to 1,000 characters and nothing past them: flooding it earns 0
    assert reward["probes"]["empty"]["reward"] == 0.0 and reward["probes"]["oversized"]["reward"] == 0.0
    assert 0.2 <= reward["observed_min"] <= reward["observed_max"] <= 0.8  # echo's random words, 0.1 per character
    # echo's action is free-form text: random words would score nonsense, so no baseline is kept
    assert reward["baseline_returns"] == [] and reward["no_baseline"].startswith("no baseline for free-form actions")
    assert reward["episodes_capped"] >= 1 and reward["steps"] > 0  # the reward check still played it
    assert (records["echo_env"].deterministic, records["echo_env"].reward_checked) == (True, True)
    fork = echo.determinism["fork"]  # echo_env offers "fork": a snapshot's future repeats (pipeline/trust_fork.py)
    assert fork["verdict"] == "forkable" and fork["first_difference"] is None and records["echo_env"].forkable is True
    assert (
        v["ignores_seed"].determinism["fork"]["verdict"] == "not_offered" and records["ignores_seed"].forkable is None
    )
    assert records["echo_env"].sessions_held == card["sessions_held"]
    with clean_factory() as s:
        baseline = s.scalars(select(Eval).where(Eval.version_id == echo.id, Eval.source == "baseline")).all()
        smoke_log = s.scalar(select(StageRun.log).where(StageRun.version_id == echo.id, StageRun.stage == "smoke"))
    assert baseline == []
    for check in ("determinism", "fork", "reward_check", "capacity"):  # each check's time is in the smoke log
        assert f"trust check {check}: " in smoke_log

    seeded = v["ignores_seed"].determinism
    assert seeded["verdict"] == "nondeterministic" and records["ignores_seed"].deterministic is False
    assert seeded["first_difference"]["step"] == 0 and seeded["first_difference"]["field"] == "observation.position"
    assert seeded["first_difference"]["first"] != seeded["first_difference"]["second"]

    quiz = v["empty_answer_max"].reward_check
    assert quiz["verdict"] == "flagged" and records["empty_answer_max"].reward_checked is False
    assert quiz["probes"]["empty"] == {"action": {"answer": ""}, "reward": 1.0, "done": True, "got_max": True}
    assert quiz["flags"] == ["the empty answer scored 1, the top of the declared range"]
    assert quiz["baseline_returns"] == [] and quiz["episodes_completed"] >= 1 and quiz["declared_range"] == [0.0, 1.0]

    leaky = v["leaks_sessions"].capacity
    assert leaky["sessions_held"] < 8
    assert "failed" in leaky["stopped_because"] and "never released" in leaky["stopped_because"]
    assert leaky["ramp"][-1]["errors"] > 0
    assert len(leaky["flags"]) == 1 and leaky["flags"][0].startswith("sessions leak: with every earlier session closed")
    assert records["leaks_sessions"].sessions_held is None  # a leaking server lists no capacity to size pools by
    assert card["flags"] == []
    assert 1.5 < leaky["idle_session_mb"] < 3  # each leaked session keeps 2 MB

    coin = v["coin_flip"].determinism
    assert coin["verdict"] == "stochastic" and coin["difference_seen"] is True  # reported, not flagged
    coin_reward = v["coin_flip"].reward_check
    assert coin_reward["verdict"] == "ok" and coin_reward["no_baseline"] is None
    assert coin_reward["baseline_returns"] and coin_reward["baseline_actions"].startswith("random actions within")
    with clean_factory() as s:
        row = s.scalar(select(Eval).where(Eval.version_id == v["coin_flip"].id, Eval.source == "baseline"))
    assert row is not None and row.model == "random" and row.returns == coin_reward["baseline_returns"]


def test_a_check_that_cannot_finish_is_unchecked_and_the_smoke_test_still_passes(
    clean_factory, hub_settings: HubSettings
) -> None:
    settings = hub_settings.model_copy(update={**TRUST_ON, "builder": "process", "trust_check_timeout_s": 0.001})
    index_source(clean_factory, LocalSource(make_envs(Path(settings.local_source), "echo_env"), trusted=True))
    assert Worker(settings, clean_factory).run_until_idle() == ["passed"]
    echo = verdicts(clean_factory)["echo_env"]
    for check in (echo.capacity, echo.determinism, echo.reward_check):
        assert check["verdict"] == "unchecked" and "did not finish within 0.001s" in check["reason"]
    record = _records(clean_factory)["echo_env"]
    assert (record.deterministic, record.reward_checked, record.sessions_held) == (None, None, None)
    with clean_factory() as s:  # no baseline without a reward check
        assert s.scalar(select(Eval.id)) is None


def test_docker_builds_get_the_image_size_and_container_memory(clean_factory, hub_settings: HubSettings) -> None:
    _needs_docker()
    settings = hub_settings.model_copy(update={**TRUST_ON, "builder": "container"})
    index_source(clean_factory, LocalSource(make_envs(Path(settings.local_source), "echo_env", "leaks_sessions")))
    assert Worker(settings, clean_factory).run_until_idle() == ["passed", "passed"]
    v = verdicts(clean_factory)
    echo = v["echo_env"].capacity
    assert 50 < echo["image_size_mb"] < settings.image_max_mb
    assert 5 < echo["server_base_mb"] < 1024  # the container's memory, within its limit
    assert echo["sessions_held"] >= 8
    assert v["echo_env"].determinism["verdict"] == "deterministic" and v["echo_env"].reward_check["verdict"] == "ok"
    leaky = v["leaks_sessions"].capacity
    assert 1.5 < leaky["idle_session_mb"] < 3 and leaky["sessions_held"] < 8


# The bundled envs, each served as a process and smoke-tested: a seed fixes each one's play.
BUNDLED = sorted(p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_env_is_deterministic_under_seed(name: str, tmp_path: Path) -> None:
    settings = HubSettings(builder="process", data_dir=tmp_path / "hub", local_source=str(tmp_path))
    out = stages.smoke(settings, stages.BuildOutput(builder="process"), ROOT / "envs" / name, stages.StageLog())
    result = out.determinism
    assert result["verdict"] == "deterministic", result["first_difference"]
    assert result["steps"] >= 1
    if name == "coding_env":  # the wall-clock time of each run is declared as varying, and left out
        assert result["ignored_fields"] == ["observation.duration_s"]
    # No bundled env rewards an empty answer; Atari's random baseline (legal moves, episodes cut at
    # 50 steps) never scores a point in Pong, so what it saw says nothing either way.
    reward = out.reward_check
    assert reward["flags"] == [] and reward["verdict"] == ("inconclusive" if name == "atari_env" else "ok"), reward
    assert out.capacity.get("flags") == [], out.capacity  # and none leaks sessions


def test_varying_fields_are_read_from_the_validation_block() -> None:
    declared = read_declared({"validation": {"varying_fields": ["observation.duration_s"]}})
    assert declared.varying_fields == ["observation.duration_s"] and declared.problems == []
    for wrong in ("duration_s", ["reward"], ["observation."], [1]):
        bad = read_declared({"validation": {"varying_fields": wrong}})
        assert bad.varying_fields == [] and [p[0] for p in bad.problems] == ["validation.varying_fields"]


def test_stochastic_is_read_from_the_validation_block() -> None:
    assert read_declared({"validation": {"stochastic": True}}).stochastic is True
    assert read_declared({"validation": {"reward": {"range": [0, 1]}}}).stochastic is False
    wrong = read_declared({"validation": {"stochastic": "sometimes"}})
    assert wrong.stochastic is False and wrong.problems == [("validation.stochastic", "must be true or false")]


@pytest.mark.interop
@pytest.mark.timeout(600)
def test_every_check_waits_while_an_upstream_server_releases_the_session_closed_before(
    upstream010_python: str, tmp_path: Path
) -> None:
    """Upstream's tools_env (tests/fixtures/upstream) holds a closed session's place for a second,
    one session at a time: each check's new session waits for it (`first_reset`), so no check is
    left unchecked, and none is flagged, for the wait."""
    import asyncio

    import httpx

    from hub_service.pipeline.trust import TrustContext
    from hub_service.pipeline.trust_checks import run_checks
    from tests.support.servers import ProcessServer

    shapes = ROOT / "tests" / "fixtures" / "upstream"
    server = ProcessServer(
        [upstream010_python, "-m", "uvicorn", "server.app:app"],
        cwd=shapes / "tools_env",
        env={"PYTHONPATH": str(shapes)},
    )
    lines: list[str] = []
    try:
        url = server.wait(timeout=400)
        settings = HubSettings(data_dir=tmp_path, **TRUST_ON, capacity_leak_sessions=3)
        ctx = TrustContext(
            settings,
            url,
            None,  # a server of its own: no memory to read
            httpx.get(url + "/schema", timeout=30).json()["action"],
            read_declared(None),
            None,
            {"cold_start_s": 1.0, "step_p50_ms": 1.0, "step_p95_ms": 1.0},
            lines.append,
        )
        out = asyncio.run(run_checks(ctx))
    finally:
        server.stop()
    log = "\n".join(lines)
    assert out["determinism"]["verdict"] == "deterministic", log
    assert out["determinism"]["fork"]["verdict"] == "not_offered", log  # upstream's server has no fork extension
    # Its tool calls carry no reward, which the reward check says; it ran, its sessions were taken.
    assert out["reward_check"]["verdict"] == "flagged" and "numeric reward" in out["reward_check"]["flags"][0], log
    assert out["reward_check"]["steps"] >= 2, log
    # a tool's name and arguments are free-form: no random baseline
    assert out["reward_check"]["baseline_returns"] == [] and out["reward_check"]["no_baseline"], log
    card = out["capacity"]
    assert card["sessions_held"] == 1 and card["ramp"][0]["errors"] == 0, card  # one at a time, as it declares
    assert card["flags"] == [], card  # sessions opened and closed one at a time were all taken: no leak
    # Its wait for the place (a second) is its release time, told apart; the one CAPACITY_REACHED said is why
    # the ramp's second level stopped (a second session at once, refused for good), never a check's failure.
    assert card["release_s"] > 0.5, card
    assert card["stopped_because"].startswith("1 of 2 sessions failed"), card
    assert "CAPACITY_REACHED" not in log.replace(card["stopped_because"], ""), log
