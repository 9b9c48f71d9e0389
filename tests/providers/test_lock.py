"""Pins and lock files against a real Hub service on 127.0.0.1: `openenv lock` writes a lock file
the Hub registers, a client built from it connects to the locked revision and refuses an env the
lock does not name, another revision, a changed image digest and another protocol version, each
with a `LockMismatchError` that says to re-run `openenv lock`; digest pins resolve to their image."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from echo_env import EchoAction, EchoEnv
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from openenv.client.env_id import EnvId, format_env_id, parse_env_id
from openenv.client.lock import Lock, LockedEnv
from openenv.client.pool import EnvPool
from openenv.errors import ConfigurationError, LockMismatchError, ResolutionError
from tests.hub.helpers import listing_hub, space
from tests.support.cli import Run
from tests.support.hf_hub import HubStandIn
from tests.support.servers import serve_app

OLD_SHA, SHA = "1" * 40, "2" * 40
OLD_DIGEST, DIGEST = "sha256:" + "a" * 64, "sha256:" + "b" * 64
REGISTRY = "127.0.0.1:5999/hub"


@dataclass
class Hub:
    url: str
    factory: sessionmaker[Session]
    token: str  # alice's, on the stand-in Hugging Face Hub


def _version(s: Session, env: EnvRecord, sha: str, digest: str) -> EnvVersion:
    version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id, EnvVersion.sha == sha))
    if version is None:
        version = EnvVersion(env_id=env.id, sha=sha, ref="main")
        s.add(version)
    version.state, version.port, version.builder = "passed", 8000, "container"
    version.image_ref = f"openenv-hub/{env.name}:{sha[:12]}"
    version.registry_ref, version.image_digest = f"{REGISTRY}/{env.owner}/{env.name}:{sha}", digest
    s.flush()
    return version


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_url: str) -> Iterator[Hub]:
    """A Hub on SQLite listing alice/echo_env (two passed revisions with pushed images; the newer is
    current and runs at `echo_url`) and alice/other_env."""

    def prepare(s: Session) -> None:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "echo_env"))
        _version(s, env, OLD_SHA, OLD_DIGEST)
        apply_verdict(env, _version(s, env, SHA, DIGEST))

    spaces = [
        space(1, owner="alice", name="echo_env", sha=SHA, host=echo_url, stage="RUNNING"),
        space(2, owner="alice", name="other_env"),
    ]
    monkeypatch.delenv("OPENENV_LOCK", raising=False)
    monkeypatch.delenv("OPENENV_TRUST_REMOTE_CODE", raising=False)
    # Registering a lock needs a Hugging Face token, which the Hub asks a stand-in Hugging Face Hub about.
    with (
        HubStandIn(tmp_path / "hf") as hf,
        listing_hub(tmp_path, spaces, prepare, hf_endpoint=hf.url) as (
            served,
            factory,
        ),
    ):
        monkeypatch.setenv("OPENENV_HUB_URL", served)
        yield Hub(served, factory, hf.token)


def _lock_with_the_cli(run_cli: Run, hub: Hub, tmp_path: Path, *ids: str) -> dict[str, Any]:
    done = run_cli("lock", *ids, "--hub", hub.url, "--token", hub.token, "-o", "openenv.lock", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- ids ----------------------------------------------------------------------------------------------


def test_digest_pins_parse_and_format_back() -> None:
    text = f"alice/echo_env@{DIGEST}"
    env_id = parse_env_id(text)
    assert env_id == EnvId("alice", "echo_env", DIGEST) and env_id.digest == DIGEST and env_id.pinned
    assert format_env_id(env_id) == text and parse_env_id(format_env_id(env_id)) == env_id
    assert parse_env_id(f"alice/echo_env@{DIGEST.upper().replace('SHA256', 'sha256')}") == env_id  # one spelling
    assert parse_env_id("alice/echo_env", DIGEST) == env_id
    assert parse_env_id(f"alice/echo_env@{SHA}").pinned and parse_env_id(f"alice/echo_env@{SHA}").digest is None
    assert not parse_env_id("alice/echo_env@main").pinned and not parse_env_id("alice/echo_env@1234567").pinned
    for bad in ("alice/echo_env@sha256:abc", f"alice/echo_env@sha256:{'g' * 64}", f"a/b@{DIGEST}0"):
        with pytest.raises(ConfigurationError, match="64 hex digits"):
            parse_env_id(bad)


def test_a_lock_file_round_trips_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    lock = Lock.of([LockedEnv("alice/echo_env", SHA, DIGEST, f"{REGISTRY}/alice/echo_env@{DIGEST}")], "http://hub")
    path = lock.save(tmp_path / "openenv.lock")
    again = Lock.load(path)
    assert again == lock and again.id == lock.id and path.read_text() == again.dumps()
    assert list(json.loads(path.read_text())) == ["created_at", "envs", "hub", "version"]
    data = lock.to_dict()
    for change, message in (
        ({"version": 2}, "version 2 lock file; this openenv reads version 1: upgrade"),
        ({"envs": {}}, "at least one env"),
        ({"envs": {"alice/echo_env": {**data["envs"]["alice/echo_env"], "revision": "main"}}}, "40-hex commit sha"),
        ({"envs": {"alice/echo_env": {**data["envs"]["alice/echo_env"], "image_digest": "sha256:1"}}}, "64 hex"),
        ({"extra": 1}, r"unknown keys \['extra'\]"),
    ):
        (tmp_path / "bad.lock").write_text(json.dumps({**data, **change}))
        with pytest.raises(ConfigurationError, match=message):
            Lock.load(tmp_path / "bad.lock")
    with pytest.raises(ConfigurationError, match=r"no lock file .*`openenv lock"):
        Lock.load(tmp_path / "missing.lock")


# -- openenv lock, and clients built from its file --------------------------------------------------------


async def test_openenv_lock_writes_a_lock_the_hub_holds_and_clients_keep_to(
    run_cli: Run, hub: Hub, tmp_path: Path, echo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = _lock_with_the_cli(run_cli, hub, tmp_path, "alice/echo_env")
    path = tmp_path / "openenv.lock"
    lock = Lock.load(path)
    assert reply["id"] == lock.id and reply["lock"] == lock.to_dict() and reply["warnings"] == []
    assert lock.hub == hub.url and list(lock.envs) == ["alice/echo_env"]
    assert lock.envs["alice/echo_env"] == LockedEnv(
        "alice/echo_env", SHA, DIGEST, f"{REGISTRY}/alice/echo_env@{DIGEST}", 1
    )
    held = httpx.get(f"{hub.url}/api/v1/locks/{lock.id}").json()
    assert held["envs"] == [f"alice/echo_env@{SHA}"] and held["expires_at"] == reply["expires_at"]
    people = run_cli(
        "lock", "alice/echo_env", "--hub", hub.url, "-o", "for-people.lock", cwd=tmp_path, env={"HF_TOKEN": hub.token}
    )
    assert people.returncode == 0 and f"alice/echo_env@{SHA[:12]}" in people.stdout and DIGEST in people.stdout
    assert "wrote for-people.lock" in people.stdout and "the Hub keeps its images until" in people.stdout

    env = await EchoEnv.from_hub("alice/echo_env", lock=path)
    async with env:
        assert (await env.step(EchoAction(message="locked"))).observation.echoed_message == "locked"
        assert env.server_protocol == 1
    assert env.resolution == [("hub", f"connected to {echo_url}")]
    assert env.hub_info is not None and env.hub_info.sha == SHA and env.hub_info.raw["lock_expires_at"] is not None

    monkeypatch.setenv("OPENENV_LOCK", str(path))  # the same through the environment, no argument
    async with await EchoEnv.from_hub("alice/echo_env") as env:
        assert (await env.step(EchoAction(message="env var"))).observation.echoed_message == "env var"

    with pytest.raises(LockMismatchError, match=r"alice/other_env is not in .*openenv.lock .*re-run `openenv lock`"):
        await EchoEnv.from_hub("alice/other_env")
    with pytest.raises(LockMismatchError, match=rf"asks for revision '{OLD_SHA[:7]}'.* locks alice/echo_env at"):
        await EchoEnv.from_hub(f"alice/echo_env@{OLD_SHA[:7]}")
    with pytest.raises(LockMismatchError, match="is not in"):  # a pool keeps to the lock too
        EnvPool.from_hub("alice/other_env", size=1, trust_remote_code=True)

    with hub.factory.begin() as s:  # the image of the locked revision changes under the lock
        s.scalar(select(EnvVersion).where(EnvVersion.sha == SHA)).image_digest = "sha256:" + "c" * 64
    with pytest.raises(LockMismatchError, match="the image changed since the lock was written; re-run") as caught:
        await EchoEnv.from_hub("alice/echo_env")
    assert caught.value.expected == DIGEST and caught.value.found == "sha256:" + "c" * 64
    with pytest.raises(LockMismatchError, match="image changed"):
        EnvPool.from_hub("alice/echo_env", size=1, trust_remote_code=True)


async def test_a_server_speaking_another_protocol_version_is_refused(hub: Hub, tmp_path: Path) -> None:
    lock = Lock.of([LockedEnv("alice/echo_env", SHA, DIGEST, None, protocol=2)], hub.url)
    with pytest.raises(LockMismatchError, match="speaks protocol version 1, the lock says 2; re-run `openenv lock`"):
        await EchoEnv.from_hub("alice/echo_env", lock=lock)


async def test_a_lock_the_hub_does_not_hold_still_pins_and_says_so(
    hub: Hub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = Lock.of([LockedEnv("alice/echo_env", SHA, DIGEST, None)], hub.url)  # never registered
    async with await EchoEnv.from_hub("alice/echo_env", lock=lock) as env:
        assert env.hub_info is not None and env.hub_info.raw["lock_expires_at"] is None
    assert "does not hold lock" in caplog.text and "re-run `openenv lock`" in caplog.text


def test_a_server_announcing_no_protocol_is_refused_unless_the_lock_says_it_had_none() -> None:
    locked = LockedEnv("alice/echo_env", SHA, DIGEST, None)  # locked against a server of this protocol
    with pytest.raises(LockMismatchError, match="announces no protocol version, the lock says 1; re-run") as caught:
        locked.check_protocol(None, "http://127.0.0.1:1")
    assert caught.value.expected == "1" and caught.value.found == "none"
    silent = LockedEnv("alice/echo_env", SHA, DIGEST, None, protocol=None)  # its server had none: it may still
    silent.check_protocol(None, "http://127.0.0.1:1")
    with pytest.raises(LockMismatchError, match="speaks protocol version 1, the lock says none"):
        silent.check_protocol(1, "http://127.0.0.1:1")
    document = Lock.of([silent], None).to_dict()
    assert document["envs"]["alice/echo_env"]["protocol"] is None
    assert Lock.from_dict(json.loads(json.dumps(document))).envs["alice/echo_env"] == silent
    del document["envs"]["alice/echo_env"]["protocol"]  # left out is not "none": it must be said
    with pytest.raises(ConfigurationError, match="has no protocol"):
        Lock.from_dict(document)


def test_registering_a_lock_needs_a_token_and_counts_against_its_user(run_cli: Run, hub: Hub, tmp_path: Path) -> None:
    done = run_cli("lock", "alice/echo_env", "--hub", hub.url, cwd=tmp_path)
    assert done.returncode == 2 and "needs your Hugging Face token" in done.stderr
    assert not (tmp_path / "openenv.lock").exists()
    document = Lock.of([LockedEnv("alice/echo_env", SHA, DIGEST, None)], hub.url).to_dict()
    anonymous = httpx.post(f"{hub.url}/api/v1/locks", json=document)
    assert anonymous.status_code == 401 and "Hugging Face token" in anonymous.json()["error"]["message"]
    wrong = httpx.post(f"{hub.url}/api/v1/locks", json=document, headers={"Authorization": "Bearer hf_not_a_token"})
    assert wrong.status_code == 401
    reply = _lock_with_the_cli(run_cli, hub, tmp_path, "alice/echo_env")
    held = httpx.get(f"{hub.url}/api/v1/locks/{reply['id']}").json()
    assert held["owner"] == "alice"


def test_openenv_lock_refuses_in_one_line_and_writes_nothing(run_cli: Run, hub: Hub, tmp_path: Path) -> None:
    (tmp_path / "envs.txt").write_text("# the run's envs\nalice/echo_env\nalice/no_such_env  # typo\n")
    done = run_cli("lock", "-f", "envs.txt", "--hub", hub.url, cwd=tmp_path)
    assert done.returncode == 1 and not (tmp_path / "openenv.lock").exists()
    assert done.stderr.count("\n") == 1 and "does not know alice/no_such_env" in done.stderr
    done = run_cli("lock", f"alice/echo_env@sha256:{'d' * 64}", "--hub", hub.url, cwd=tmp_path)
    assert done.returncode == 1 and f"did you mean its current image, alice/echo_env@{DIGEST}" in done.stderr
    done = run_cli("lock", "alice/echo_env", cwd=tmp_path)
    assert done.returncode == 2 and "--hub URL or set OPENENV_HUB_URL" in done.stderr


async def test_digest_pins_resolve_to_their_revision_and_image(run_cli: Run, hub: Hub, tmp_path: Path) -> None:
    record = httpx.get(f"{hub.url}/api/v1/envs/alice/echo_env/resolve", params={"revision": OLD_DIGEST}).json()
    assert record["revision"] == OLD_SHA and record["image"] == f"{REGISTRY}/alice/echo_env@{OLD_DIGEST}"
    reply = _lock_with_the_cli(run_cli, hub, tmp_path, f"alice/echo_env@{OLD_DIGEST}")
    assert reply["lock"]["envs"]["alice/echo_env"]["revision"] == OLD_SHA
    # a digest names an image: it is run from that image, never from the running Space (HF builds its own)
    with pytest.raises(ResolutionError, match="a digest pin runs its image") as caught:
        await EchoEnv.from_hub(f"alice/echo_env@{DIGEST}", steps=("hub", "space"))
    assert caught.value.attempts[1][1].startswith("a digest pin runs only the image")
    with pytest.raises(ResolutionError, match=f"did you mean .*alice/echo_env@{DIGEST}"):
        await EchoEnv.from_hub(f"alice/echo_env@sha256:{'e' * 64}", steps=("hub",))


async def test_a_hub_that_answers_a_pin_with_another_image_is_not_believed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub (here a stand-in that answers every resolve with the same record) cannot move a pin."""

    async def resolve(request: Request) -> JSONResponse:
        return JSONResponse(
            {"repo_id": "alice/echo_env", "revision": SHA, "status": "passing", "image_digest": DIGEST, "source": "hf"}
        )

    with serve_app(Starlette(routes=[Route("/api/v1/envs/{owner}/{name}/resolve", resolve)])) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        monkeypatch.delenv("OPENENV_LOCK", raising=False)
        for pin in (OLD_DIGEST, OLD_SHA):
            with pytest.raises(ResolutionError, match=f"not the pinned {pin}; a pin always names the same image"):
                await EchoEnv.from_hub(f"alice/echo_env@{pin}", steps=("hub", "space"))
