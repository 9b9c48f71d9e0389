"""from_hub through each resolution step, against a real HTTP resolve service and the local
Hugging Face Hub stand-in (tests/support/hf_hub), driven by the real huggingface_hub client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from echo_env import EchoAction, EchoEnv
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openenv import GenericEnvClient
from openenv.client.env_id import EnvId, format_env_id, parse_env_id
from openenv.client.providers import lifecycle
from openenv.errors import ConfigurationError, RemoteCodeError, ResolutionError
from tests.providers.conftest import ECHO_DIR, RUN_LABEL
from tests.support.hf_hub import HubStandIn
from tests.support.servers import serve_app

READY = "Echo environment ready!"


def _echo_files(ready: str = READY) -> dict[str, bytes]:
    files = {}
    for path in ECHO_DIR.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            files[str(path.relative_to(ECHO_DIR))] = path.read_bytes()
    env = "server/echo_environment.py"
    files[env] = files[env].replace(READY.encode(), ready.encode())
    return files


@pytest.fixture()
def hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HubStandIn]:
    with HubStandIn(tmp_path / "hub") as stand_in:
        for key, value in stand_in.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("OPENENV_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "openenv-cache"))
        monkeypatch.delenv("OPENENV_HUB_URL", raising=False)
        monkeypatch.delenv("OPENENV_TRUST_REMOTE_CODE", raising=False)
        yield stand_in


def _host(url: str) -> str:
    return urlsplit(url).netloc


@pytest.fixture()
def resolve_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """A tiny OpenEnv Hub service serving resolve records (the shape in docs/hub-api.md, "Resolve")."""
    state: dict = {"records": {}, "seen": []}

    async def resolve(request: Request) -> JSONResponse:
        repo = f"{request.path_params['owner']}/{request.path_params['name']}"
        state["seen"].append((repo, request.query_params.get("revision")))
        record = state["records"].get(repo)
        if record is None:
            return JSONResponse({"detail": f"unknown env {repo}"}, status_code=404)
        return JSONResponse(record)

    app = Starlette(routes=[Route("/api/v1/envs/{owner}/{name}/resolve", resolve)])
    with serve_app(app) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        state["url"] = url
        yield state


# -- ids --------------------------------------------------------------------------------------------


def test_env_ids_round_trip() -> None:
    assert parse_env_id("openenv/echo_env@v1.2") == EnvId("openenv", "echo_env", "v1.2")
    assert parse_env_id("openenv/echo_env", "main") == EnvId("openenv", "echo_env", "main")
    for text in ("openenv/echo_env", "a-b/c.d@0123abcd"):
        assert format_env_id(parse_env_id(text)) == text
    for bad in ("echo_env", "a/b/c", "a/b@", "/b", ""):
        with pytest.raises(ConfigurationError, match=r"env id|revision"):
            parse_env_id(bad)
    with pytest.raises(ConfigurationError, match="pass one"):
        parse_env_id("a/b@x", "y")


# -- step 1: the OpenEnv Hub service ----------------------------------------------------------------


async def test_step1_hub_service_record_with_a_live_endpoint(
    hub: HubStandIn, resolve_service: dict, echo_url: str
) -> None:
    resolve_service["records"]["openenv/echo_env"] = {  # the shape of hub_service's ResolveRecord (docs/hub-api.md)
        "repo_id": "openenv/echo_env",
        "revision": "a" * 40,
        "status": "passing",
        "stage": "RUNNING",
        "url": echo_url,
        "image": "providers-test/none:1",
        "source": "hf",
        "local": {},
        "yanked": False,
    }
    env = await EchoEnv.from_hub("openenv/echo_env@v1")
    async with env:
        assert (await env.step(EchoAction(message="hub"))).observation.echoed_message == "hub"
    assert resolve_service["seen"] == [("openenv/echo_env", "v1")]
    assert env.resolution == [("hub", f"connected to {echo_url}")]
    assert hub.request_count() == 0  # the Hugging Face Hub was not needed


async def test_step1_unknown_to_the_service_then_step2_the_running_space(
    hub: HubStandIn, resolve_service: dict, echo_url: str
) -> None:
    # An underscore and upper case in the name: the URL comes from the Hub's answer, not the name.
    hub.create_space("Alice/My_Echo_Env", files=_echo_files(), stage="RUNNING", domains=[_host(echo_url)])
    env = await GenericEnvClient.from_hub("Alice/My_Echo_Env")
    async with env:
        assert (await env.reset()).observation["echoed_message"] == READY
    assert env.resolution[0] == (
        "hub",
        f"{resolve_service['url']} does not know Alice/My_Echo_Env (404: unknown env Alice/My_Echo_Env)",
    )
    assert env.resolution[1] == ("space", f"connected to {echo_url}")


async def test_step1_record_without_a_running_endpoint_moves_on(
    hub: HubStandIn, resolve_service: dict, echo_url: str
) -> None:
    resolve_service["records"]["alice/echo_env"] = {
        "repo_id": "alice/echo_env",
        "revision": "b" * 40,
        "status": "passing",
        "stage": "SLEEPING",
        "url": None,
        "image": None,
        "source": "hf",
        "local": {},
        "yanked": False,
    }
    hub.create_space("alice/echo_env", files=_echo_files(), stage="RUNNING", domains=[_host(echo_url)])
    env = await EchoEnv.from_hub("alice/echo_env")
    await env.close()
    assert env.resolution == [
        ("hub", "the service knows it (passing, stage SLEEPING) but lists no running endpoint"),
        ("space", f"connected to {echo_url}"),
    ]


# -- step 2: the Space ---------------------------------------------------------------------------------


def test_step2_sleeping_space_is_woken_and_waited_for(hub: HubStandIn, echo_url: str) -> None:
    hub.create_space("alice/echo_env", files=_echo_files(), stage="SLEEPING", domains=[_host(echo_url)])
    runtime_route = "/api/spaces/{owner}/{name}/runtime"

    def the_hub_wakes_it() -> None:
        # What the real Hub does after a wake request: some time later the runtime runs.
        deadline = time.monotonic() + 20
        while hub.request_count("GET", runtime_route) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        hub.set_runtime("alice/echo_env", stage="RUNNING")

    waker = threading.Thread(target=the_hub_wakes_it)
    waker.start()
    started = time.monotonic()
    with EchoEnv.from_hub("alice/echo_env", wake_timeout_s=30).sync() as env:
        assert env.reset().observation.echoed_message == READY
        assert env.resolution[-1] == ("space", f"connected to {echo_url}")
    waker.join()
    assert time.monotonic() - started < 15


def test_step2_a_space_that_stays_asleep_is_given_up_on_in_bounded_time(hub: HubStandIn, echo_url: str) -> None:
    hub.create_space("alice/echo_env", files=_echo_files(), stage="SLEEPING", domains=[_host(echo_url)])
    started = time.monotonic()
    with pytest.raises(RemoteCodeError) as info:
        EchoEnv.from_hub("alice/echo_env", wake_timeout_s=1).sync()
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert "trust_remote_code=True" in message and "OPENENV_TRUST_REMOTE_CODE=1" in message
    steps = dict(info.value.attempts)
    assert steps["hub"].startswith("skipped: no OpenEnv Hub service configured")
    assert steps["space"].startswith("the Space was SLEEPING and is SLEEPING after 1s")
    assert (
        steps["container"].startswith("skipped: it would run the Space's code")
        and steps["process"] == steps["container"]
    )


def test_unknown_space_says_so_and_tries_nothing_local(hub: HubStandIn) -> None:
    with pytest.raises(ResolutionError) as info:
        EchoEnv.from_hub("alice/no_such_env", trust_remote_code=True).sync()
    assert [step for step, _ in info.value.attempts] == ["hub", "space"]
    assert "no Space alice/no_such_env on the Hub" in str(info.value)


# -- step 3: a local container ---------------------------------------------------------------------------


@pytest.mark.docker
async def test_step3_the_spaces_image_when_it_is_here(
    hub: HubStandIn, echo_image: str, docker_engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENENV_SPACE_IMAGE", "providers-test/space-{owner}-{name}:latest")
    docker_engine.api.tag(echo_image, "providers-test/space-alice-echo-env", "latest")
    try:
        hub.create_space("alice/echo_env", files=_echo_files(), stage="RUNTIME_ERROR")
        env = await EchoEnv.from_hub("alice/echo_env", trust_remote_code=True)
        async with env:
            assert (await env.reset()).observation.echoed_message == READY
            assert env.provider.image == "providers-test/space-alice-echo-env:latest"
        assert env.resolution[1] == ("space", "the Space is RUNTIME_ERROR")
        assert env.resolution[2][0] == "container"
    finally:
        docker_engine.api.remove_image("providers-test/space-alice-echo-env:latest")


@pytest.mark.docker
@pytest.mark.slow
def test_step3_builds_the_pinned_revision_when_no_image_can_be_pulled(
    hub: HubStandIn, base_image: str, docker_engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The registry is a local port where nothing listens: the pull fails at once, on 127.0.0.1.
    monkeypatch.setenv("OPENENV_SPACE_IMAGE", "127.0.0.1:9/{owner}-{name}:latest")
    monkeypatch.setenv("OPENENV_BASE_IMAGE", base_image)
    first = hub.create_space(
        "alice/pinned_env", files=_echo_files("revision one"), stage="RUNNING", domains=["127.0.0.1:9"]
    )
    pinned = hub.space("alice/pinned_env").resolve("main").oid
    hub.commit(
        "alice/pinned_env", {"server/echo_environment.py": _echo_files("revision two")["server/echo_environment.py"]}
    )
    assert first is not None
    with EchoEnv.from_hub(
        f"alice/pinned_env@{pinned}", trust_remote_code=True, steps=("space", "container")
    ).sync() as env:
        assert env.reset().observation.echoed_message == "revision one"
        tag = env.provider.image
        assert tag.endswith(f":{pinned[:12]}")
        steps = dict(env.resolution)
    assert steps["space"].startswith("the Space runs") and "not the pinned revision" in steps["space"]
    docker_engine.api.remove_image(tag, force=True)


# -- step 4: a local process ---------------------------------------------------------------------------------


def test_step4_process_from_the_files_at_the_pinned_revision(hub: HubStandIn) -> None:
    hub.create_space("alice/echo_env", files=_echo_files("revision one"), stage="RUNNING", domains=["127.0.0.1:9"])
    pinned = hub.space("alice/echo_env").resolve("main").oid
    hub.commit(
        "alice/echo_env", {"server/echo_environment.py": _echo_files("revision two")["server/echo_environment.py"]}
    )
    with EchoEnv.from_hub(
        "alice/echo_env", revision=pinned, trust_remote_code=True, steps=("space", "process")
    ).sync() as env:
        assert env.reset().observation.echoed_message == "revision one"
        pid = env.provider.proc.pid
        assert dict(env.resolution)["process"].startswith("connected to http://127.0.0.1:")
    assert lifecycle.process_identity(pid) is None  # close() stopped it
    assert lifecycle.list_running(labels=dict([RUN_LABEL]), docker=False) == []


def test_each_step_in_turn_until_a_process_runs(hub: HubStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _echo_files()
    del files["Dockerfile"]  # nothing to build a container from: the process step is the one that works
    hub.create_space("alice/echo_env", files=files, stage="BUILD_ERROR")
    monkeypatch.setenv("OPENENV_TRUST_REMOTE_CODE", "1")
    monkeypatch.setenv("OPENENV_SPACE_IMAGE", "127.0.0.1:9/{owner}-{name}:latest")
    with EchoEnv.from_hub("alice/echo_env").sync() as env:
        assert env.step(EchoAction(message="four")).reward == pytest.approx(0.4)
        steps = [step for step, _ in env.resolution]
        outcomes = dict(env.resolution)
    assert steps == ["hub", "space", "container", "process"]
    assert outcomes["space"] == "the Space is BUILD_ERROR"
    assert "no Dockerfile" in outcomes["container"] or "Docker" in outcomes["container"]
