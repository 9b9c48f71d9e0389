"""from_hub through each resolution step, against a real HTTP resolve service and the local
Hugging Face Hub stand-in (tests/support/hf_hub), driven by the real huggingface_hub client."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
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
from tests.support.registry import Registry, test_registry
from tests.support.servers import payment_required_host, serve_app

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


# -- Spaces as they behave: asleep, waking, 402, a registry that wants a login ----------------------------


def _heard_stages(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The Space's stages `from_hub` said it saw while it waited, in order, each once."""
    stages: list[str] = []
    for record in caplog.records:
        for stage in re.findall(r"the Space is ([A-Z_]+) \(", record.getMessage()):
            if not stages or stages[-1] != stage:
                stages.append(stage)
    return stages


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "openenv.resolve"]


def test_a_sleeping_space_is_woken_and_each_stage_is_shown_while_it_is_waited_for(
    hub: HubStandIn, echo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    hub.create_space("alice/echo_env", files=_echo_files(), stage="SLEEPING", domains=[_host(echo_url)])
    # What the Hub does with a wake request: the Space starts, then runs.
    hub.wake_plan("alice/echo_env", [("APP_STARTING", 0.3), ("RUNNING", 1.5)])
    caplog.set_level(logging.INFO, logger="openenv.resolve")
    with EchoEnv.from_hub("alice/echo_env", wake_timeout_s=30).sync() as env:
        assert env.reset().observation.echoed_message == READY
        assert env.resolution[-1] == ("space", f"connected to {echo_url}")
    assert hub.request_count("POST", "/api/spaces/{owner}/{name}/restart") == 1
    assert _heard_stages(caplog) == ["SLEEPING", "APP_STARTING", "RUNNING"]
    (waiting,) = _warnings(caplog)
    assert "restart requested" in waiting and "waiting up to 30s" in waiting
    assert "OPENENV_SPACE_WAKE_TIMEOUT_S" in waiting


@pytest.fixture()
def space_image_here(docker_engine: Any, echo_image: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """alice/echo_env's image (OPENENV_SPACE_IMAGE) on this engine: what the container step runs."""
    monkeypatch.setenv("OPENENV_SPACE_IMAGE", "providers-test/space-{owner}-{name}:latest")
    docker_engine.api.tag(echo_image, "providers-test/space-alice-echo-env", "latest")
    try:
        yield "providers-test/space-alice-echo-env:latest"
    finally:
        docker_engine.api.remove_image("providers-test/space-alice-echo-env:latest")


@pytest.mark.docker
async def test_a_space_asleep_past_the_setting_falls_back_to_its_image_and_says_so(
    hub: HubStandIn,
    echo_url: str,
    space_image_here: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub.create_space("alice/echo_env", files=_echo_files(), stage="SLEEPING", domains=[_host(echo_url)])
    monkeypatch.setenv("OPENENV_SPACE_WAKE_TIMEOUT_S", "1")  # the setting that bounds the wait
    caplog.set_level(logging.INFO, logger="openenv.resolve")
    started = time.monotonic()
    env = await EchoEnv.from_hub("alice/echo_env", trust_remote_code=True)
    async with env:
        assert (await env.reset()).observation.echoed_message == READY
        assert env.provider.image == space_image_here
    assert time.monotonic() - started < 60
    outcomes = dict(env.resolution)
    assert outcomes["space"].startswith("the Space was SLEEPING and is SLEEPING after 1s")
    assert "still not running after wake_timeout_s (OPENENV_SPACE_WAKE_TIMEOUT_S)" in outcomes["space"]
    assert outcomes["container"].startswith("connected to http://127.0.0.1:")
    waited, fell_back = _warnings(caplog)
    assert "waiting up to 1s" in waited
    assert "still not running" in fell_back and fell_back.endswith("falling back to its image (step container)")


@pytest.fixture()
def payment_required() -> Iterator[str]:
    with payment_required_host() as url:
        yield url


@pytest.mark.docker
@pytest.mark.parametrize("stage", ["RUNNING", "SLEEPING"])
async def test_a_space_that_answers_402_falls_back_to_its_image_at_once_and_says_so(
    hub: HubStandIn,
    payment_required: str,
    space_image_here: str,
    stage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub.create_space("alice/echo_env", files=_echo_files(), stage=stage, domains=[_host(payment_required)])
    hub.wake_plan("alice/echo_env", [("RUNNING", 0.1)])
    started = time.monotonic()
    env = await EchoEnv.from_hub("alice/echo_env", trust_remote_code=True, wake_timeout_s=120, health_timeout_s=120)
    async with env:
        assert (await env.reset()).observation.echoed_message == READY
        assert env.provider.image == space_image_here
    assert time.monotonic() - started < 60  # neither waited for a wake nor for /health to stop saying 402
    outcomes = dict(env.resolution)
    assert outcomes["space"].startswith(f"the Space answers 402 Payment Required at {payment_required}")
    assert hub.request_count("POST", "/api/spaces/{owner}/{name}/restart") == 0  # a 402 is not woken
    (fell_back,) = _warnings(caplog)
    assert "402 Payment Required" in fell_back and fell_back.endswith("falling back to its image (step container)")


@pytest.fixture()
def space_registry(
    hub: HubStandIn, docker_engine: Any, echo_image: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Registry, str]]:
    """The test registry (scripts/registry, htpasswd) standing in for registry.hf.space: alice/echo_env's
    image pushed there and gone from this engine; the registry's user is a user of the stand-in Hub whose
    token is the registry's password, as a Hugging Face user's token is registry.hf.space's password."""
    registry = test_registry()
    prefix = f"{registry.host}/t{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("OPENENV_SPACE_IMAGE", prefix + "/{owner}-{name}:latest")
    for name in ("OPENENV_REGISTRY_USER", "OPENENV_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    repository = f"{prefix}/alice-echo-env"
    docker_engine.api.tag(echo_image, repository, "latest")
    pushed = list(docker_engine.api.push(repository, tag="latest", auth_config=registry.auth, stream=True, decode=True))
    assert not [m for m in pushed if "error" in m], pushed
    docker_engine.api.remove_image(f"{repository}:latest")
    hub.add_user(registry.user, token=registry.password)
    files = _echo_files()
    del files["Dockerfile"]  # nothing to build instead: the image is the one way
    hub.create_space("alice/echo_env", files=files, stage="RUNTIME_ERROR")
    try:
        yield registry, f"{repository}:latest"
    finally:
        with contextlib.suppress(Exception):  # docker.errors.ImageNotFound: the pull never happened
            docker_engine.api.remove_image(f"{repository}:latest", force=True)


@pytest.mark.docker
async def test_the_spaces_image_is_pulled_from_its_registry_with_the_users_token(
    space_registry: tuple[Registry, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, image = space_registry
    monkeypatch.setenv("HF_TOKEN", registry.password)  # the token of the Hub's user registry.user
    env = await EchoEnv.from_hub("alice/echo_env", trust_remote_code=True, steps=("space", "container"))
    async with env:
        assert (await env.step(EchoAction(message="pulled"))).observation.echoed_message == "pulled"
        assert env.provider.image == image
    assert dict(env.resolution)["space"] == "the Space is RUNTIME_ERROR"


@pytest.mark.docker
def test_without_a_token_the_registrys_refusal_says_how_to_log_in(
    space_registry: tuple[Registry, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, image = space_registry
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    with pytest.raises(ResolutionError) as info:
        EchoEnv.from_hub("alice/echo_env", trust_remote_code=True, steps=("space", "container")).sync()
    said = dict(info.value.attempts)["container"]
    assert said.startswith(f"{image}: image {image} needs a login to {registry.host}"), said
    for hint in ("set HF_TOKEN", "hf auth login", f"docker login {registry.host} -u <your Hugging Face user name>"):
        assert hint in said, said
