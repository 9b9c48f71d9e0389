"""`from_hub("owner/name@rev")` on another machine (issue 23): a live Hub's record names the image the
Hub pushed to its registry by digest; a Docker engine that has never seen it (scripts/docker-engine2,
a second private engine standing in for another machine) pulls it by that digest with the user's
registry credentials, checks the digest, runs it on 127.0.0.1 and the client plays. A record whose
digest the registry does not hold, whose reference disagrees with its digest, or whose signature
is not the Hub's, runs nothing."""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from echo_env import EchoAction, EchoEnv
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service import signing
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.pipeline.publish import Published, push_tested_image
from hub_service.pipeline.stages import BuildOutput, StageLog
from hub_service.settings import HubSettings
from openenv.client.providers.container import ContainerProvider, ImageDigestError
from openenv.errors import ResolutionError
from tests.hub.helpers import listing_hub, space
from tests.providers.conftest import RUN_LABEL
from tests.support.registry import Registry, engine2, test_registry
from tests.support.servers import free_port


@pytest.fixture(scope="module")
def hub_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The signing key of the publishing Hub and of the Hub the client asks (one Hub's key)."""
    folder = tmp_path_factory.mktemp("hub-key")
    signing.signer(HubSettings(data_dir=folder))  # made on first use
    return folder / "signing" / "cosign.key"


@pytest.fixture(scope="module")
def pushed(echo_image: str, hub_key: Path) -> tuple[Registry, Published, str]:
    """The echo image, pushed to the test registry by the Hub's publish code and signed: (registry, published, sha)."""
    registry = test_registry()
    sha = f"{7:040x}"
    settings = HubSettings(
        registry=f"{registry.host}/t{uuid.uuid4().hex[:10]}",
        registry_user=registry.user,
        registry_password=SecretStr(registry.password),
        local_source=None,
        signing_key_file=hub_key,
    )
    result = push_tested_image(
        settings, BuildOutput(builder="container", image_ref=echo_image), "alice", "echo_env", sha, StageLog()
    )
    assert result.pushed is not None and result.signature is not None
    return registry, result, sha


@contextmanager
def _hub(
    tmp_path: Path, sha: str, registry_ref: str, digest: str, signature: dict[str, Any] | None, key: Path
) -> Iterator[str]:
    """A Hub service (signing with `key`) whose alice/echo_env@sha passed, with its image pushed as
    `registry_ref` / `digest` and signed (`signature`: the record the publish stage keeps)."""

    def prepare(s: Session) -> None:
        env = s.scalar(select(EnvRecord))
        version = s.scalar(select(EnvVersion))
        assert version.sha == sha
        version.state, version.port, version.builder = "passed", 8000, "container"
        version.image_ref = "openenv-hub/alice-echo_env:" + sha[:12]  # on the Hub's own engine only
        version.registry_ref, version.image_digest, version.signature = registry_ref, digest, signature
        s.flush()
        apply_verdict(env, version)

    spaces = [space(7, owner="alice", name="echo_env", stage="SLEEPING", host=None)]
    with listing_hub(tmp_path, spaces, prepare, signing_key_file=key) as (url, _):
        yield url


@pytest.fixture()
def other_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pushed: tuple[Registry, Published, str]
) -> Iterator[Any]:
    """The second engine, with no image of the pushed repository; the user's registry login in the
    environment, and a cache of the user's own (the Hub's key is kept there at first use)."""
    registry, published, _ = pushed
    assert published.pushed is not None
    result = published.pushed
    engine = engine2()
    for image in engine.images.list(name=result.repository):
        engine.images.remove(image.id, force=True)
    monkeypatch.setenv("OPENENV_REGISTRY_USER", registry.user)
    monkeypatch.setenv("OPENENV_REGISTRY_PASSWORD", registry.password)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # no Space to fall back on
    monkeypatch.delenv("OPENENV_TRUST_REMOTE_CODE", raising=False)
    monkeypatch.delenv("OPENENV_HUB_SIGNING_KEY", raising=False)
    monkeypatch.delenv("OPENENV_ALLOW_UNSIGNED", raising=False)
    monkeypatch.setenv("OPENENV_CACHE_DIR", str(tmp_path / "user-cache"))
    try:
        yield engine
    finally:
        for container in engine.containers.list(all=True, filters={"label": f"{RUN_LABEL[0]}={RUN_LABEL[1]}"}):
            container.remove(force=True)
        for image in engine.images.list(name=result.repository):  # the next test's engine has seen nothing either
            engine.images.remove(image.id, force=True)
        engine.close()


@pytest.mark.docker
async def test_from_hub_on_an_engine_that_never_saw_the_image_pulls_it_by_digest_and_plays(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pushed: tuple[Registry, Published, str],
    other_machine: Any,
    hub_key: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, published, sha = pushed
    result = published.pushed
    assert result is not None
    assert not other_machine.images.list(name=result.repository)  # never seen
    caplog.set_level(logging.INFO, logger="openenv.resolve")
    with _hub(tmp_path / "hub", sha, result.registry_ref, result.digest, published.signature, hub_key) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        env = await EchoEnv.from_hub(
            f"alice/echo_env@{sha}", trust_remote_code=True, steps=("hub", "container"), docker_client=other_machine
        )
        async with env:
            assert env.hub_info is not None and env.hub_info.image == result.pinned
            assert (env.hub_info.image_digest, env.hub_info.image_tag) == (result.digest, result.registry_ref)
            assert env.base_url.startswith("http://127.0.0.1:")
            await env.reset()
            assert (await env.step(EchoAction(message="from afar"))).observation.echoed_message == "from afar"
            container = other_machine.containers.get(env.provider.container_id)
            assert container.status == "running" and container.attrs["Config"]["Image"] == result.pinned
        assert env.resolution[-1][0] == "container"
    pulled = other_machine.images.get(result.pinned)
    assert result.pinned in pulled.attrs["RepoDigests"]
    # the Hub's signature was checked before the pull, with the Hub's key, now kept for next time
    assert any("signature verified with" in r.getMessage() for r in caplog.records), caplog.text
    assert list((tmp_path / "user-cache" / "hub-keys").glob("*.pem"))


async def _refused(sha: str, engine: Any) -> ResolutionError:
    """What `from_hub` of alice/echo_env@sha raised, through the Hub and the docker step only."""
    with pytest.raises(ResolutionError) as caught:
        await EchoEnv.from_hub(
            f"alice/echo_env@{sha}", trust_remote_code=True, steps=("hub", "container"), docker_client=engine
        )
    return caught.value


@pytest.mark.docker
async def test_a_digest_the_registry_does_not_hold_runs_nothing_and_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pushed: tuple[Registry, Published, str],
    other_machine: Any,
    hub_key: Path,
) -> None:
    """Signed by the Hub (the registry lost it, say): the pull by digest finds nothing, and says so."""
    _, published, sha = pushed
    result = published.pushed
    assert result is not None
    tampered = "sha256:" + "0" * 64
    settings = HubSettings(signing_key_file=hub_key)
    body = signing.payload(result.repository, tampered)
    signed = {"payload": base64.b64encode(body).decode(), "signature": signing.signer(settings).sign(body)}
    with _hub(tmp_path / "hub", sha, result.registry_ref, tampered, signed, hub_key) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        caught = await _refused(sha, other_machine)
    message = str(caught)
    assert f"{result.repository}@{tampered}" in message and "could not be pulled by its digest" in message
    assert not other_machine.containers.list(all=True, filters={"label": f"{RUN_LABEL[0]}={RUN_LABEL[1]}"})
    assert not other_machine.images.list(name=result.repository)


@pytest.mark.docker
async def test_an_image_whose_signature_is_not_the_hubs_runs_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pushed: tuple[Registry, Published, str],
    other_machine: Any,
    hub_key: Path,
) -> None:
    """A record signed by another key (its Hub's key changed, or someone else's record), and one
    with no signature: nothing is pulled, and the message says what to do."""
    _, published, sha = pushed
    result = published.pushed
    assert result is not None and published.signature is not None
    other = signing.signer(HubSettings(data_dir=tmp_path / "other"))  # another Hub's key, made here
    other_key = tmp_path / "other" / "signing" / "cosign.key"
    # the user pinned the Hub's key beforehand; this Hub signs with another one
    pinned = tmp_path / "hub.pub"
    pinned.write_text(signing.public_key(HubSettings(signing_key_file=hub_key)))
    monkeypatch.setenv("OPENENV_HUB_SIGNING_KEY", str(pinned))
    body = signing.payload(result.repository, result.digest)
    forged = {"payload": base64.b64encode(body).decode(), "signature": other.sign(body)}
    with _hub(tmp_path / "hub", sha, result.registry_ref, result.digest, forged, other_key) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        caught = await _refused(sha, other_machine)
    assert "does not verify with OPENENV_HUB_SIGNING_KEY" in str(caught), caught
    with _hub(tmp_path / "hub2", sha, result.registry_ref, result.digest, None, hub_key) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        caught = await _refused(sha, other_machine)
    assert "unsigned" in str(caught) and "OPENENV_ALLOW_UNSIGNED=1" in str(caught)
    assert not other_machine.images.list(name=result.repository)


def test_a_reference_that_disagrees_with_its_digest_is_refused() -> None:
    digest, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    with pytest.raises(ImageDigestError, match=r"refused .* does not name the digest"):
        ContainerProvider(f"127.0.0.1:5000/alice/echo_env@{other}", digest=digest)
    with pytest.raises(ImageDigestError, match="does not name the digest"):
        ContainerProvider("127.0.0.1:5000/alice/echo_env:latest", digest=digest)
    assert ContainerProvider(f"127.0.0.1:5000/alice/echo_env@{digest}", digest=digest).digest == digest
