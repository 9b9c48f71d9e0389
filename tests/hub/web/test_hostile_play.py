"""Hostile Spaces and visitors against "play" and "let a model try" (issue 22): endpoints that
point inside, raced caps, failed Spaces, oversized env replies. Every server is on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from hub_service.play import NotPlayable, PlayError, PlayLimit, PlayStartError
from hub_service.play.policies import LLMPolicy, check_public_endpoint
from hub_service.play.sessions import PlayManager
from hub_service.queue import jobs
from hub_service.settings import HubSettings
from hub_service.ui.try_panel import choose_endpoint
from tests.hub.helpers import ListSource, space
from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app

SECRET = "INTERNAL-ONLY-a41c"
ACTION = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


def hostile_env(*, schema_pad: int = 0, reply_pad: int = 0) -> FastAPI:
    """An env server (the wire protocol's reset/step/state) whose replies can be made huge."""
    app = FastAPI()
    app.state.sockets = 0

    @app.get("/schema")
    async def schema() -> StreamingResponse:
        async def body() -> Any:
            yield b'{"action": ' + JSONResponse(ACTION).body + b', "pad": "'
            for _ in range(schema_pad // 65536):
                yield b"x" * 65536
            yield b'"}'

        return StreamingResponse(body(), media_type="application/json")

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        app.state.sockets += 1
        try:
            while True:
                message = await socket.receive_json()
                if message["type"] == "state":
                    await socket.send_json({"type": "state", "data": {"episode_id": "e", "step_count": 0}})
                    continue
                observation = {"echoed": "x" * reply_pad, "done": False, "reward": 0.0}
                await socket.send_json(
                    {"type": "observation", "data": {"observation": observation, "reward": 0.0, "done": False}}
                )
        except WebSocketDisconnect:
            pass

    return app


def live_space(factory: sessionmaker[Session], host: str, state: str, reason: str = "reset never answered") -> str:
    """An indexed Space, RUNNING at `host`, whose latest revision ended `state` (failed: for
    `reason`); returns its id."""
    index_source(factory, ListSource([space(1, host=host, stage="RUNNING")]))
    claim = jobs.claim(factory, "w")
    assert claim is not None
    jobs.finish(factory, claim.job_id, "w", ok=state == "passed")
    with factory.begin() as s:
        version = s.get(EnvVersion, claim.version_id)
        assert version is not None
        version.state = state
        if state == "failed":
            version.failure_stage, version.failure_reason = "smoke", reason
        env = s.get(EnvRecord, version.env_id)
        assert env is not None
        apply_verdict(env, version)
        return str(env.repo_id)


@pytest.fixture()
def settings(hub_settings: HubSettings) -> HubSettings:
    return hub_settings.model_copy(
        update={"play_instance_linger_s": 0.0, "play_max_reply_mb": 1.0, "step_timeout_s": 5.0}
    )


@pytest.fixture()
def internal() -> Iterator[tuple[str, FastAPI]]:
    """A stand-in for a service inside the Hub's network: it must never be reached by a visitor."""
    app = openai_standin(api_key=None, models={"m"}, replies=[f'{{"message": "{SECRET}"}}'])
    with serve_app(app) as url:
        yield url, app


# -- SSRF through "let a model try" -----------------------------------------------------------


def test_only_endpoints_the_operator_lists_are_offered_by_default(
    settings: HubSettings, internal: tuple[str, FastAPI]
) -> None:
    url, _ = internal
    with pytest.raises(PlayError, match="operator has set up no model endpoint, so only the random baseline"):
        choose_endpoint(settings, f"{url}/v1", "m", "")
    listed = settings.model_copy(update={"llm_allowed_endpoints": [f"{url}/v1/"]})
    assert choose_endpoint(listed, f"{url}/v1", "m", "t") == (f"{url}/v1", "m", "t")  # the operator's word is trusted


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "169.254.169.254",
        "10.1.2.3",
        "0.0.0.0",
        "[::]",
        "224.0.0.1",
        "[fe80::1]",
        "[fd00::1]",
        "100.64.0.1",
    ],
)
async def test_custom_endpoints_that_resolve_inside_are_refused(
    host: str, settings: HubSettings, internal: tuple[str, FastAPI]
) -> None:
    custom = settings.model_copy(update={"llm_allow_custom_endpoint": True})
    url, app = internal
    port = url.rsplit(":", 1)[1]
    base = f"http://{host}:{port}/v1"
    assert choose_endpoint(custom, base, "m", "")[0] == base  # allowed in principle...
    with pytest.raises(
        PlayError, match=r"resolves to .* address: this Hub lets visitors' models play only through public"
    ):
        await check_public_endpoint(base)  # ...refused for where it points
    assert app.state.requests == []


async def test_the_connection_itself_is_checked_so_a_name_that_changes_its_mind_gets_nowhere(
    internal: tuple[str, FastAPI],
) -> None:
    url, app = internal
    policy = LLMPolicy(base_url=f"{url}/v1", model="m", token=None, schema=ACTION, env_name="e", description="")
    decision = await policy.act({"x": 1}, 1)
    assert decision.action is None and decision.error is not None
    assert "127.0.0.1, a loopback address" in decision.error and SECRET not in decision.error
    assert app.state.requests == []  # the Hub never sent it a byte of a request


async def test_redirects_are_not_followed_and_error_bodies_are_not_shown(internal: tuple[str, FastAPI]) -> None:
    inside, app = internal
    bouncer = FastAPI()

    @bouncer.post("/v1/chat/completions")
    async def bounce(request: Request) -> Any:
        if request.headers.get("authorization") == "Bearer redirect":
            return RedirectResponse(f"{inside}/v1/chat/completions", status_code=307)
        return PlainTextResponse(f"<html>{SECRET} admin console</html>", status_code=500)

    with serve_app(bouncer) as url:  # an operator-listed endpoint that misbehaves
        outcomes = []
        for token in ("redirect", "error"):
            policy = LLMPolicy(
                base_url=f"{url}/v1",
                model="m",
                token=token,
                schema=ACTION,
                env_name="e",
                description="",
                public_only=False,
            )
            outcomes.append(await policy.act({"x": 1}, 1))
    assert "HTTP 307" in str(outcomes[0].error) and "does not follow" in str(outcomes[0].error)
    assert "HTTP 500" in str(outcomes[1].error)
    assert all(SECRET not in str(d.error) and d.raw is None for d in outcomes)
    assert app.state.requests == []


# -- caps and what may be played -------------------------------------------------------------


async def test_simultaneous_starts_cannot_pass_the_caps(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    capped = settings.model_copy(
        update={"play_max_sessions": 8, "play_max_sessions_per_visitor": 3, "play_visitor_share": 0.25}
    )
    with serve_app(hostile_env()) as url:
        env_id = live_space(clean_factory, url, "passed")
        owner, name = env_id.split("/")
        play = PlayManager(capped, clean_factory)
        try:
            outcomes = await asyncio.gather(
                *(play.open(f"tab-{i}", "mallory", owner, name) for i in range(10)), return_exceptions=True
            )
            opened = [o for o in outcomes if not isinstance(o, BaseException)]
            refused = [o for o in outcomes if isinstance(o, PlayLimit)]
            assert len(opened) == 2 and len(refused) == 8  # her fair share of 8 is 2, not 10
            assert "you already have 2 play sessions open or starting" in str(refused[0])
            await asyncio.gather(
                *(play.open(f"tab-t{i}", "trudy", owner, name) for i in range(5)), return_exceptions=True
            )
            # Two greedy visitors hold half the Hub; a third still gets in.
            assert play.stats()["sessions"] == 4
            await play.open("tab-alice", "alice", owner, name)
        finally:
            await play.aclose()


async def test_a_running_space_whose_revision_failed_is_not_playable(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    with serve_app(hostile_env()) as url:
        env_id = live_space(clean_factory, url, "failed")
        play = PlayManager(settings, clean_factory)
        with pytest.raises(NotPlayable, match=r"failed at smoke: reset never answered\. Come back when it passes"):
            await play.open("tab", "v", *env_id.split("/"))
        assert play.stats()["sessions"] == 0


def test_a_refusal_to_play_reaches_the_visitor_without_internal_addresses(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    """Issue 47 (item 8): a revision whose failure names the addresses its server ran at. The
    refusal to play it says why without them: on the website (its play panel's Reset, as a
    browser sends it) and in the API's error reply; the Hub's own log keeps them."""
    import httpx

    from hub_service.app import create_app

    leaky = "reset never answered at http://172.17.0.5:8000/ws: the server at 127.0.0.1:32771 closed it"
    with serve_app(hostile_env()) as url:
        env_id = live_space(clean_factory, url, "failed", reason=leaky)
        with pytest.raises(NotPlayable) as refused:
            asyncio.run(PlayManager(settings, clean_factory).open("tab", "v", *env_id.split("/")))
        site = create_app(settings.model_copy(update={"website": True}), run_migrations=False)
        with serve_app(site) as hub, httpx.Client(base_url=hub, timeout=60) as client:
            shown = _play_reset(client, env_id)
    assert "172.17.0.5" in str(refused.value) and "32771" in str(refused.value)  # the log's text, whole
    api = refused.value.body()["error"]["message"]  # what the API's one handler of Hub errors replies
    for text in (api, shown):
        assert "cannot be played" in text and "reset never answered at the env" in text, text
        assert "172.17.0.5" not in text and "127.0.0.1" not in text and "32771" not in text, text


def _play_reset(client: Any, env_id: str) -> str:
    """The notice the website's play panel shows after Reset on `env_id`, through Gradio's queue
    as a browser drives it: the page opens at the env (which the panel then plays), then Reset."""
    import json

    config = client.get("/config").json()
    events = {d.get("api_name"): d for d in config["dependencies"]}
    values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
    session = "visitor-47"

    def event(name: str, data: list[Any], query: str = "") -> list[Any]:
        dep = events[name]
        body = {"data": data, "fn_index": dep["id"], "session_hash": session, "event_data": None, "trigger_id": None}
        client.post(f"/gradio_api/queue/join{query}", json=body).raise_for_status()
        with client.stream("GET", "/gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed":
                    assert message.get("success"), message
                    return list(message["output"]["data"])
        raise AssertionError(f"no result of {name}")

    event("open_site", [values[i] for i in events["open_site"]["inputs"]], f"?env={env_id}&panel=play")
    out = event("do_reset", [None, "", "", None, ""])  # (its env comes from the page the session opened; no tab token)
    notices = [o for o in out if isinstance(o, str) and "oe-msg" in o]
    assert notices, out
    return notices[0]


async def test_a_visitor_starting_again_waits_for_the_place_as_long_as_the_setting_says(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    """Issue 47 (item 10): a server of one session that frees a closed one's place half a second
    later. A visitor who starts again at once waits for it up to `play_release_grace_s`: with 0,
    they are told the env is full; with the default, they play."""
    from openenv.errors import CapacityReachedError
    from tests.hub.test_capacity_ramp import _one_session_server

    with serve_app(_one_session_server(sessions=1, release_s=0.5)) as url:
        owner, name = live_space(clean_factory, url, "passed").split("/")
        for grace in (0.0, 3.0):  # (3 s: the default)
            play = PlayManager(settings.model_copy(update={"play_release_grace_s": grace}), clean_factory)
            try:
                first = await play.open("tab-1", "v", owner, name)
                await first.reset()
                await play.close("tab-1")
                again = await play.open("tab-2", "v", owner, name)
                if grace:
                    assert "observation" in await again.reset()
                else:
                    with pytest.raises(CapacityReachedError):
                        await again.reset()
            finally:
                await play.aclose()
            await asyncio.sleep(1.0)  # the place of the last session is free again


# -- replies from env servers are read within a cap -------------------------------------------


async def test_an_oversized_schema_is_refused_naming_the_limit(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    with serve_app(hostile_env(schema_pad=3 << 20)) as url:
        env_id = live_space(clean_factory, url, "passed")
        play = PlayManager(settings, clean_factory)
        try:
            with pytest.raises(PlayStartError, match=r"larger than 1 MB \(play_max_reply_mb\)"):
                await play.open("tab", "v", *env_id.split("/"))
            assert play.stats()["sessions"] == 0
        finally:
            await play.aclose()


async def test_an_oversized_observation_ends_the_session_naming_the_limit(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    from openenv.errors import OpenEnvError

    with serve_app(hostile_env(reply_pad=3 << 20)) as url:
        env_id = live_space(clean_factory, url, "passed")
        play = PlayManager(settings, clean_factory)
        try:
            session = await play.open("tab", "v", *env_id.split("/"))
            with pytest.raises(OpenEnvError, match=r"larger than this Hub's limit of 1 MB \(play_max_reply_mb\)"):
                await session.reset()
            again = await play.open("tab-2", "v", *env_id.split("/"))  # the Hub (and the Space) keep serving
            assert again is not session
        finally:
            await play.aclose()


# -- the website's own routes ------------------------------------------------------------------


def test_website_events_are_rate_limited_and_uploads_refused(
    settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    import httpx
    from gradio.utils import get_upload_folder

    from hub_service.app import create_app

    limited = settings.model_copy(update={"website": True, "rate_web_burst": 5, "rate_web_per_minute": 1})
    uploads = Path(get_upload_folder())
    # Files only: Gradio makes empty folders of its own there when an app starts (vibe_edit_history).
    before = {p for p in uploads.rglob("*") if p.is_file()}
    with serve_app(create_app(limited, run_migrations=False)) as url:
        upload = httpx.post(f"{url}/gradio_api/upload", files={"files": ("big.bin", b"x" * 4096)})
        assert upload.status_code == 403 and "takes no file uploads" in upload.json()["error"]["message"]
        join = {"data": [], "fn_index": 0, "session_hash": "h", "event_data": None, "trigger_id": None}
        codes = [httpx.post(f"{url}/gradio_api/queue/join", json=join).status_code for _ in range(8)]
        assert 429 not in codes[:5] and codes[5:] == [429, 429, 429]
        refused = httpx.post(f"{url}/gradio_api/queue/join", json=join)
        assert (
            "too many actions on the website" in refused.json()["error"]["message"] and refused.headers["retry-after"]
        )
        assert httpx.get(f"{url}/api/v1/envs").status_code == 200  # the API and pages keep serving
        assert httpx.get(f"{url}/").status_code == 200
    after = {p for p in uploads.rglob("*") if p.is_file()}
    assert after == before  # nothing the visitor sent stayed on disk
