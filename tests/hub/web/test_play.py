"""Play sessions through the service: private per tab, capped, reaped, and on the env the
pipeline checked; model tries with the random baseline and with an LLM over real HTTP (one that
cannot be asked stops the try at once); env failures told in the env's words."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hub_service.play import NotPlayable, PlayError, PlayLimit
from hub_service.play.episodes import run_episodes
from hub_service.play.policies import LLMPolicy, RandomPolicy, parse_action
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from hub_service.ui.play_panel import OPTIONS_PLACEHOLDER, options_hint
from hub_service.ui.try_panel import choose_endpoint
from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app

pytestmark = pytest.mark.slow
TOKEN = "sk-very-secret-token-123"


async def test_each_tab_plays_a_private_session_and_the_env_stops_when_the_last_leaves(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    play = PlayManager(web_settings, clean_factory)
    try:
        a = await play.open("tab-a", "10.0.0.1", "local", "echo_env")
        b = await play.open("tab-b", "10.0.0.1", "local", "echo_env")
        assert a.instance is b.instance and a.instance.target.how == "process"  # one server, two sessions
        assert a.action_schema["required"] == ["message"]
        await a.reset()
        await b.reset()
        await a.step({"message": "hello"})
        out = await a.step({"message": "hi"})
        assert out["observation"]["echoed_message"] == "hi" and out["reward"] == pytest.approx(0.2)
        assert (await a.state())["step_count"] == 2 and (await b.state())["step_count"] == 0
        assert [h["action"] for h in a.history] == [{"message": "hello"}, {"message": "hi"}] and b.history == []
        assert await play.open("tab-a", "10.0.0.1", "local", "echo_env") is a  # the same tab finds its session
        provider = a.instance.provider
        await play.close("tab-a")
        assert provider.running  # tab b still plays on it
        await play.close("tab-b")
        assert not provider.running and play.stats() == {"sessions": 0, "visitors": 0, "instances": []}
    finally:
        await play.aclose()


async def test_caps_per_visitor_and_in_total(web_settings: HubSettings, clean_factory: sessionmaker[Session]) -> None:
    settings = web_settings.model_copy(update={"play_max_sessions_per_visitor": 1, "play_max_sessions": 2})
    play = PlayManager(settings, clean_factory)
    try:
        await play.open("t1", "alice", "local", "echo_env")
        with pytest.raises(PlayLimit, match="you already have 1"):
            await play.open("t2", "alice", "local", "echo_env")
        await play.open("t3", "bob", "local", "echo_env")
        with pytest.raises(PlayLimit, match="all 2 play sessions"):
            await play.open("t4", "carol", "local", "echo_env")
        await play.close("t1")
        await play.open("t2", "alice", "local", "echo_env")  # a closed session frees the place
        assert play.stats()["sessions"] == 2
    finally:
        await play.aclose()
    assert play.stats()["instances"] == []


async def test_starting_sessions_and_model_tries_is_rate_limited_per_visitor(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    from hub_service.limits import RateLimiter

    limiter = RateLimiter({"play": (2, 0.01), "model": (1, 0.01)})
    play = PlayManager(web_settings, clean_factory, limiter)
    try:
        await play.open("t1", "alice", "local", "echo_env")
        await play.close("t1")
        await play.open("t2", "alice", "local", "echo_env")
        await play.close("t2")
        with pytest.raises(PlayLimit, match=r"too many play sessions in a short time; try again in \d+s"):
            await play.open("t3", "alice", "local", "echo_env")
        await play.open("t4", "bob", "local", "echo_env")  # other visitors are not affected
        await play.check_rate("model", "alice")
        with pytest.raises(PlayLimit, match="too many model tries"):
            await play.check_rate("model", "alice")
    finally:
        await play.aclose()


async def test_idle_sessions_are_reaped_and_their_env_stopped(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    play = PlayManager(web_settings.model_copy(update={"play_idle_timeout_s": 2.0}), clean_factory)
    try:
        session = await play.open("tab", "v", "local", "echo_env")
        provider = session.instance.provider
        await session.reset()
        deadline = time.monotonic() + 30
        # The session goes first, then its env (the reaper closes the one, then stops the other).
        while (play.sessions or provider.running) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not play.sessions and not provider.running
        assert play.get("tab") is None
    finally:
        await play.aclose()


async def test_a_started_env_lingers_for_the_next_visitor(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    play = PlayManager(web_settings.model_copy(update={"play_instance_linger_s": 60}), clean_factory)
    try:
        first = await play.open("tab-1", "v", "local", "echo_env")
        provider = first.instance.provider
        await play.close("tab-1")
        second = await play.open("tab-2", "v", "local", "echo_env")
        assert second.instance.provider is provider and provider.running  # no second start
    finally:
        await play.aclose()
    assert not provider.running  # shutdown stops it


async def test_an_env_that_failed_its_checks_cannot_be_played(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    play = PlayManager(web_settings, clean_factory)
    with pytest.raises(NotPlayable, match="failed at validate"):
        await play.open("tab", "v", "local", "bad_manifest")
    assert play.stats()["sessions"] == 0


async def test_the_random_baseline_has_none_for_free_form_actions(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    """echo_env's action is free-form text: random words would score nonsense (0.1 a character), so
    the random baseline plays nothing and says so; the reset's picture still shows."""
    play = PlayManager(web_settings, clean_factory)
    try:
        session = await play.open("tab", "v", "local", "echo_env", kind="try")
        events = [
            e
            async for e in run_episodes(
                session, RandomPolicy(session.action_schema, seed=3), episodes=2, max_steps=4, render=True
            )
        ]
    finally:
        await play.aclose()
    steps = [e for e in events if e["type"] == "step"]
    summary = events[-1]
    assert len(steps) == 1 and steps[0]["action"] is None, steps
    assert steps[0]["error"].startswith("no baseline for free-form actions: the observation lists no legal actions")
    assert summary["type"] == "summary" and summary["stopped"] == steps[0]["error"] and summary["episodes"] == 1
    assert events[-2]["type"] == "episode_end" and events[-2]["reason"] == steps[0]["error"]
    assert events[0]["type"] == "episode" and events[0]["frame"].media_type == "text/plain"


async def test_an_llm_plays_and_unusable_answers_are_shown_and_counted(
    web_settings: HubSettings, clean_factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    replies = [
        '{"message": "hello"}',
        'Sure!\n```json\n{"message": "fenced"}\n```',
        "I would rather chat.",
        '{"nope": 1}',
        '{"message": "ok"}',
    ]
    standin = openai_standin(api_key=TOKEN, models={"tiny-model"}, replies=replies)
    play = PlayManager(web_settings, clean_factory)
    with serve_app(standin) as llm:
        try:
            session = await play.open("tab", "v", "local", "echo_env", kind="try")
            policy = LLMPolicy(
                base_url=f"{llm}/v1",
                model="tiny-model",
                token=TOKEN,
                schema=session.action_schema,
                env_name=session.env_id,
                description=session.description,
                public_only=False,
            )
            events = [e async for e in run_episodes(session, policy, episodes=1, max_steps=5)]
        finally:
            await play.aclose()
    steps = [e for e in events if e["type"] == "step"]
    assert [s["action"] for s in steps] == [
        {"message": "hello"},
        {"message": "fenced"},
        None,
        {"nope": 1},
        {"message": "ok"},
    ]
    assert steps[2]["raw"] == "I would rather chat." and "no JSON object" in steps[2]["error"]
    assert "refused" in steps[3]["error"] and steps[3]["observation"] is None
    assert steps[0]["observation"]["echoed_message"] == "hello" and "Echo environment ready!" in steps[0]["prompt"]
    assert events[-1]["invalid"] == 2 and events[-1]["score"] == pytest.approx(0.5 + 0.6 + 0.2)
    sent = standin.state.requests
    assert len(sent) == 5 and all(r["headers"]["authorization"] == f"Bearer {TOKEN}" for r in sent)
    assert '"message"' in sent[0]["body"]["messages"][0]["content"]  # the system prompt carries the action schema
    assert "was not accepted" in sent[3]["body"]["messages"][-3]["content"]  # the model hears why
    assert TOKEN not in caplog.text and TOKEN not in repr(events)


async def test_a_model_that_cannot_be_asked_stops_the_try_at_once(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    play = PlayManager(web_settings, clean_factory)
    with serve_app(openai_standin(api_key=TOKEN, models={"tiny-model"}, replies=['{"message": "hi"}'])) as llm:
        try:
            session = await play.open("tab", "v", "local", "echo_env", kind="try")
            outcomes = {}
            for base, model, token in (
                (closed, "tiny-model", TOKEN),
                (f"{llm}/v1", "tiny-model", "wrong"),
                (f"{llm}/v1", "no-such-model", TOKEN),
            ):
                policy = LLMPolicy(
                    base_url=base,
                    model=model,
                    token=token,
                    schema=session.action_schema,
                    env_name="echo",
                    description="",
                    public_only=False,
                )
                outcomes[(base, token)] = [e async for e in run_episodes(session, policy, episodes=3, max_steps=5)]
        finally:
            await play.aclose()
    lines = []
    for events in outcomes.values():
        steps = [e for e in events if e["type"] == "step"]
        summary = events[-1]
        assert len(steps) == 1 and summary["episodes"] == 1  # no second turn, no second episode
        assert summary["stopped"] == steps[0]["error"] and events[-2]["reason"] == "the model could not be asked"
        lines.append(summary["stopped"])
    assert lines == [
        f"cannot reach the model endpoint at {closed}: connection refused",
        f"the model endpoint at {llm}/v1 refused the token (HTTP 401); check the token",
        f"the model endpoint at {llm}/v1 has no model 'no-such-model' (HTTP 404); check the model's name and the base URL",
    ]


def test_env_failures_are_told_in_the_envs_words_without_internal_addresses() -> None:
    from hub_service.play.errors import describe_env_failure
    from openenv.errors import EnvConnectionError, EnvDisconnectedError, server_error_from_frame

    inside = "http://127.0.0.1:32795"
    failed = server_error_from_frame(
        {"message": "the hand is over; call reset() to deal again", "code": "EXECUTION_ERROR"}, url=inside
    )
    assert describe_env_failure(failed) == "the env says: the hand is over; call reset() to deal again"
    refused = server_error_from_frame(
        {
            "message": "Invalid message",
            "code": "VALIDATION_ERROR",
            "errors": [{"loc": ["action"], "msg": "Input should be 'hit' or 'stand'"}],
        },
        url=inside,
    )
    assert describe_env_failure(refused) == "the env refused this action: action: Input should be 'hit' or 'stand'"
    gone = describe_env_failure(EnvConnectionError(f"cannot connect to {inside}/ws: refused", url=inside))
    assert "not the env's fault" in gone and "127.0.0.1" not in gone
    assert "127.0.0.1" not in describe_env_failure(
        EnvDisconnectedError(f"closed by {inside} (1011)", url=inside, close_code=1011)
    )
    leaky = server_error_from_frame(
        {"message": f"cannot reach {inside}/internal or http://10.0.0.7:8080/x", "code": "EXECUTION_ERROR"}
    )
    assert "127.0.0.1" not in describe_env_failure(leaky) and "10.0.0.7" not in describe_env_failure(leaky)


def test_the_services_token_goes_only_to_the_services_endpoint(web_settings: HubSettings) -> None:
    from pydantic import SecretStr

    settings = web_settings.model_copy(
        update={
            "llm_base_url": "http://127.0.0.1:9/v1",
            "llm_model": "m",
            "llm_token": SecretStr(TOKEN),
            "llm_allowed_endpoints": ["http://127.0.0.1:7/v1"],
        }
    )
    assert choose_endpoint(settings, "", "", "") == ("http://127.0.0.1:9/v1", "m", TOKEN)
    assert choose_endpoint(settings, "http://127.0.0.1:9/v1/", "other", "") == ("http://127.0.0.1:9/v1", "other", TOKEN)
    assert choose_endpoint(settings, "http://127.0.0.1:7/v1", "", "") == ("http://127.0.0.1:7/v1", "m", None)
    assert choose_endpoint(settings, "http://127.0.0.1:7/v1", "", "mine")[2] == "mine"
    with pytest.raises(PlayError, match="only through the endpoints its operator lists"):
        choose_endpoint(settings, "http://127.0.0.1:8/v1", "", "")
    with pytest.raises(PlayError, match="no model endpoint"):
        choose_endpoint(web_settings, "", "m", "")
    with pytest.raises(PlayError, match="model's name"):
        choose_endpoint(settings.model_copy(update={"llm_model": None}), "http://127.0.0.1:7/v1", "", "")


def test_parse_action_finds_the_json_object() -> None:
    assert parse_action('{"a": 1}') == {"a": 1}
    assert parse_action('Let me think. {"a": {"b": [1]}} done') == {"a": {"b": [1]}}
    assert parse_action('```json\n{"a": 2}\n```') == {"a": 2}
    for bad in ("", "   ", "[1, 2]", "{not json}", "move left"):
        with pytest.raises(ValueError):
            parse_action(bad)


def test_what_an_env_draws_or_names_is_shown_inert() -> None:
    from hub_service.ui.play_panel import choices_html
    from hub_service.ui.views import frame_view
    from openenv.render import Frame

    hostile = (
        b'<div onclick="steal()">board<script>steal()</script><img src="http://10.0.0.7/x" onerror="steal()"></div>'
    )
    shown = frame_view(Frame("text/html", hostile))
    assert "board" in shown and not any(bad in shown for bad in ("<script", "onclick", "onerror", "10.0.0.7"))
    svg = frame_view(Frame("image/svg+xml", b'<svg><script>steal()</script><rect width="4" height="4"/></svg>'))
    assert svg.startswith('<div class="oe-picture"><img class="oe-frame"') and "data:image/svg+xml;base64," in svg
    assert "cannot be shown" in frame_view(Frame("text/plain", b"\xff\xfe not utf-8"))
    board = {
        "choices": [
            {"label": '<img src=x onerror="steal()">', "action": {"move": "x"}, "key": None},
            {"label": "up", "action": {"move": "up"}, "key": "ArrowUp"},
        ],
        "done": True,
        "serial": 7,
    }
    buttons = choices_html(board)
    assert "<img" not in buttons and 'data-choice="7:0"' in buttons and buttons.count(" disabled>") == 2
    assert 'class="oe-act oe-key-ArrowUp"' in buttons and "Keys: ↑ up" in buttons


def test_seeds_and_options_are_checked_at_the_edge_with_a_message_that_says_what_to_do() -> None:
    from hub_service.ui.play_panel import MAX_SEED, parse_options, parse_seed

    assert parse_seed(" 42 ") == 42 and parse_seed("") is None and parse_seed(str(MAX_SEED)) == MAX_SEED
    for bad in (str(10**25), str(MAX_SEED + 1), "-1", "4.5", "١٢", "x" * 500):
        with pytest.raises(PlayError, match=f"whole number from 0 to {MAX_SEED}") as refused:
            parse_seed(bad)
        assert len(refused.value.message) < 200  # a long paste is not echoed back whole
    assert parse_options('{"max_plies": 20, "nested": [1, {"a": -3}]}') == {"max_plies": 20, "nested": [1, {"a": -3}]}
    for bad in (f'{{"max_plies": {10**25}}}', '{"x": [1e400]}', '{"x": {"y": NaN}}', f'{{"x": -{10**20}}}'):
        with pytest.raises(PlayError, match="finite and between"):
            parse_options(bad)
    with pytest.raises(PlayError, match="its README lists them") as refused:
        parse_options("[1, 2]")
    assert "max_plies" not in refused.value.message  # no other env's example


def test_the_options_box_shows_the_envs_own_options_and_defaults_not_another_envs() -> None:
    from chess_env.server.chess_environment import ChessEnvironment

    from openenv.server.app import _reset_options

    chess = options_hint(_reset_options(ChessEnvironment))  # what chess's /schema says, read the same way
    assert chess.startswith('its options, with their defaults: {"opponent": "random", "depth": 2, ')
    assert '"max_plies": 200' in chess and chess.endswith("also: fen, split, index")
    assert options_hint({"type": "object", "properties": {}, "additionalProperties": False}) == (
        "this env takes no episode options: leave this empty"
    )
    assert "any keyword arguments" in options_hint({"properties": {}, "additionalProperties": True})
    assert options_hint(None) == OPTIONS_PLACEHOLDER  # a server that does not say (upstream's)
    assert "max_plies" not in OPTIONS_PLACEHOLDER


def test_model_try_states_its_situation_once_per_failure_kind(web_settings: HubSettings) -> None:
    from hub_service.ui.try_panel import NO_ENDPOINT, models_can_try

    # no endpoint at all: the LLM choice is not offered, and every way of asking says the same one thing
    assert not models_can_try(web_settings)
    for url in ("", "http://127.0.0.1:7/v1"):
        with pytest.raises(PlayError) as refused:
            choose_endpoint(web_settings, url, "m", "")
        assert refused.value.message == NO_ENDPOINT and "leave the base URL empty" not in NO_ENDPOINT
    listed = web_settings.model_copy(update={"llm_allowed_endpoints": ["http://127.0.0.1:7/v1"]})
    assert models_can_try(listed)
    with pytest.raises(PlayError, match=r"enter a base URL: one of those .* \(http://127.0.0.1:7/v1\)$"):
        choose_endpoint(listed, "", "m", "")
    with pytest.raises(PlayError) as other:
        choose_endpoint(listed, "http://127.0.0.1:8/v1", "m", "")
    assert other.value.message.endswith("operator lists: http://127.0.0.1:7/v1")  # no "use its own": it has none
    custom = web_settings.model_copy(update={"llm_allow_custom_endpoint": True})
    assert models_can_try(custom)
    with pytest.raises(PlayError, match="must start with http"):
        choose_endpoint(custom, "ftp://example.org", "m", "")


def test_checks_never_show_the_address_the_smoke_server_ran_on() -> None:
    from types import SimpleNamespace

    from hub_service.ui.views import report_view, stages_view

    run = SimpleNamespace(
        stage="smoke", attempt=1, status="passed", seconds=1.0, log="GET http://127.0.0.1:32771/health ok"
    )
    shown = stages_view([run]) + report_view(
        {"status": "pass", "checks": [{"id": "ws", "status": "pass", "message": "ws://127.0.0.1:32771/ws answered"}]}
    )
    assert "127.0.0.1" not in shown and "32771" not in shown and "the env&#x27;s server" in shown


async def test_unknown_episode_options_are_refused_naming_the_ones_the_env_takes(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    play = PlayManager(web_settings, clean_factory)
    try:
        session = await play.open("tab", "v", "local", "echo_env")
        # the env server tells what its reset takes (/schema "reset_options"), read from its signature
        assert session.reset_options is not None and "max_steps" in session.reset_options["properties"]
        assert "seed" not in session.reset_options["properties"]
        with pytest.raises(PlayError) as typo:
            session.check_options({"max_stepz": 1})
        assert (
            typo.value.message == "local/echo_env has no episode option 'max_stepz'; it takes: max_steps (default null)"
        )
        session.check_options({"max_steps": 1})
        assert options_hint(session.reset_options) == "its options: max_steps"  # the box's placeholder
        first = await session.reset(options={"max_steps": 1})  # the session goes on after a refusal
        assert first["done"] is False
    finally:
        await play.aclose()
