"""Play sessions on Spaces as they behave (issue 49): a sleeping Space is woken and waited for, the
visitor told each stage the Hub reports (and the Space's health record shows each at once); one that stays asleep past play_space_wake_timeout_s, or
answers 402 Payment Required, is played on this Hub instead, or the visitor is told why it cannot be.
The Hugging Face Hub is the local stand-in (tests/support/hf_hub) over real HTTP, asked by the real
huggingface_hub client; the Space's host is a real server on 127.0.0.1."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.orm import sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.health.service import env_health
from hub_service.indexer.service import index_source
from hub_service.play import NotPlayable
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT, payment_required_host

RESTART = ("POST", "/api/spaces/{owner}/{name}/restart")
SHA = f"{49:040x}"


@pytest.fixture()
def stand_in(tmp_path: Path) -> Iterator[HubStandIn]:
    with HubStandIn(tmp_path / "hf") as hub:
        yield hub


def _hub(tmp_path: Path, stand_in: HubStandIn, host: str, *, trusted: bool = False) -> tuple[HubSettings, sessionmaker]:
    """A Hub whose catalog holds alice/echo_env, passed, a SLEEPING Space at `host`; `trusted`: this Hub
    also has its files, so it can play it itself when the Space does not wake."""
    url = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(url)
    factory = sessionmaker_for(make_engine(url))
    index_source(factory, ListSource([space(49, owner="alice", name="echo_env", sha=SHA, stage="SLEEPING", host=host)]))
    folder = tmp_path / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with factory.begin() as s:
        env, version = s.scalar(select(EnvRecord)), s.scalar(select(EnvVersion))
        version.state, version.port, version.builder = "passed", 8000, "process"
        env.trusted, env.location = trusted, str(folder) if trusted else None
        s.flush()
        apply_verdict(env, version)
    settings = HubSettings(
        data_dir=tmp_path / "data",
        database_url=url,
        local_source=None,
        website=False,
        hf_endpoint=stand_in.url,
        hf_token=SecretStr(stand_in.token),
        play_instance_linger_s=0.0,
        play_space_wake_timeout_s=30.0,
    )
    stand_in.create_space("alice/echo_env", stage="SLEEPING", domains=[host.split("://", 1)[1]])
    return settings, factory


def _stages(said: list[str]) -> list[str]:
    stages: list[str] = []
    for line in said:
        stage = line.split(" is ", 1)[1].split(" ", 1)[0]
        if not stages or stages[-1] != stage:
            stages.append(stage)
    return stages


async def test_a_sleeping_space_is_woken_and_the_visitor_is_told_each_stage(
    tmp_path: Path, stand_in: HubStandIn, echo_url: str
) -> None:
    settings, factory = _hub(tmp_path, stand_in, echo_url)
    stand_in.wake_plan("alice/echo_env", [("APP_STARTING", 0.3), ("RUNNING", 1.5)])
    said: list[str] = []
    play = PlayManager(settings, factory)
    try:
        session = await play.open("tab", "10.0.0.1", "alice", "echo_env", on_wait=said.append)
        assert (session.instance.target.how, session.instance.url) == ("space", echo_url)
        assert (await session.reset())["observation"]["echoed_message"] == "Echo environment ready!"
    finally:
        await play.aclose()
    assert stand_in.requests[RESTART] == 1
    assert said[0].startswith("alice/echo_env is SLEEPING on the Hugging Face Hub: waking it, and waiting up to 30s")
    assert _stages(said) == ["SLEEPING", "APP_STARTING", "RUNNING"]
    with factory() as s:  # the Space's health shows the wake at once, not at the next poll
        view = env_health(s, "alice", "echo_env")
    assert (view.health, view.stage) == ("running", "RUNNING")
    assert [(t.previous, t.health, t.stage) for t in reversed(view.history)] == [
        (None, "sleeping", "SLEEPING"),
        ("sleeping", "building", "APP_STARTING"),
        ("building", "running", "RUNNING"),
    ]


async def test_a_space_asleep_past_the_setting_is_played_on_this_hub_instead(
    tmp_path: Path, stand_in: HubStandIn, echo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings, factory = _hub(tmp_path, stand_in, echo_url, trusted=True)
    settings = settings.model_copy(update={"play_space_wake_timeout_s": 1.0})  # and no wake plan: it sleeps on
    said: list[str] = []
    play = PlayManager(settings, factory)
    try:
        session = await play.open("tab", "10.0.0.1", "alice", "echo_env", on_wait=said.append)
        assert session.instance.target.how == "process" and session.instance.url != echo_url
        assert (await session.step({"message": "here"}))["observation"]["echoed_message"] == "here"
    finally:
        await play.aclose()
    told = "the Space alice/echo_env was SLEEPING and is SLEEPING after 1s (play_space_wake_timeout_s)"
    assert said[-1] == f"{told}: playing it on this Hub instead (process)"
    assert any(r.levelname == "WARNING" and told in r.getMessage() for r in caplog.records)


@pytest.fixture()
def payment_required() -> Iterator[str]:
    with payment_required_host() as url:
        yield url


async def test_a_space_that_answers_402_is_not_waited_for_and_the_visitor_is_told_why(
    tmp_path: Path, stand_in: HubStandIn, payment_required: str
) -> None:
    settings, factory = _hub(tmp_path, stand_in, payment_required)
    stand_in.wake_plan("alice/echo_env", [("RUNNING", 0.1)])
    play = PlayManager(settings, factory)
    started = time.monotonic()
    try:
        with pytest.raises(NotPlayable) as info:
            await play.open("tab", "10.0.0.1", "alice", "echo_env")
    finally:
        await play.aclose()
    assert time.monotonic() - started < 10  # not the 30 s of play_space_wake_timeout_s
    assert str(info.value.message) == (
        f"the Space alice/echo_env answers 402 Payment Required at {payment_required}, and this Hub has no image "
        "of it to run; try again later"
    )
    assert stand_in.requests[RESTART] == 0
