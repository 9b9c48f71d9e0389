"""Signed, immutable publishing (RFC 008's hub.cosign_signature and hub.immutable_versioning), on
the real registry of the tests (scripts/registry, htpasswd auth) and the real Docker engine.

The signatures are checked with nothing of the Hub's: the registry's manifests read over plain
HTTP, the payload blob by its digest, and `openssl dgst -verify` with the public key the Hub serves.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from hub_service import signing
from hub_service.app import create_app
from hub_service.catalog.models import EnvVersion
from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.pipeline import publish
from hub_service.pipeline.builders import BuildOutput
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.support.registry import Registry, manifest_digest, test_registry
from tests.support.servers import serve_app

pytestmark = [pytest.mark.slow]


def _settings(tmp_path: Path, registry: Registry, namespace: str, **more: Any) -> HubSettings:
    db = f"sqlite:///{tmp_path / 'hub.sqlite3'}"
    migrate(db)
    return HubSettings(
        **{
            "data_dir": tmp_path / "hubdata",
            "database_url": db,
            "local_source": str(tmp_path / "envs"),
            "base_image": os.environ.get("OPENENV_TEST_BASE_IMAGE"),
            "website": False,
            "determinism_check": False,
            "reward_check": False,
            "capacity_check": False,
            "statistical_episodes": 0,
            "registry": namespace,
            "registry_user": registry.user,
            "registry_password": SecretStr(registry.password),
            **more,
        }
    )


def _get(registry: Registry, path: str, accept: str = "application/vnd.oci.image.manifest.v1+json") -> bytes:
    reply = httpx.get(
        f"http://{registry.host}/v2/{path}",
        headers={"Accept": accept},
        auth=(registry.user, registry.password),
        timeout=10,
        follow_redirects=True,
    )
    assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
    return reply.content


def openssl_verifies(public_pem: str, payload: bytes, signature_b64: str, tmp_path: Path) -> bool:
    """What OpenSSL says of an ECDSA-SHA256 signature (DER, base64) over `payload`."""
    folder = tmp_path / f"openssl-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    (folder / "key.pem").write_text(public_pem)
    (folder / "payload").write_bytes(payload)
    (folder / "sig.der").write_bytes(base64.b64decode(signature_b64))
    out = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", "key.pem", "-signature", "sig.der", "payload"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.returncode == 0 and "Verified OK" in out.stdout


def cosign_signature(registry: Registry, repository: str, digest: str) -> tuple[bytes, str]:
    """(payload, base64 signature) as cosign lays them out: the tag `sha256-<hex>.sig`, one layer of
    the simple signing media type, the signature in the layer's annotation."""
    manifest = json.loads(_get(registry, f"{repository}/manifests/sha256-{digest.removeprefix('sha256:')}.sig"))
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    body = _get(registry, f"{repository}/blobs/{layer['digest']}", accept="*/*")
    assert "sha256:" + hashlib.sha256(body).hexdigest() == layer["digest"] and len(body) == layer["size"]
    return body, layer["annotations"]["dev.cosignproject.cosign/signature"]


def test_a_signature_is_cosigns_layout_and_openssl_verifies_it(tmp_path: Path) -> None:
    """Signed by digest: the payload names the image; OpenSSL verifies it with the served key, and a
    signature of another image or by another key does not pass the Hub's own check."""
    registry = test_registry()
    settings = _settings(tmp_path, registry, f"{registry.host}/t{uuid.uuid4().hex[:10]}")
    repository = f"{settings.registry.split('/', 1)[1]}/local/thing"  # type: ignore[union-attr]
    digest = "sha256:" + hashlib.sha256(b"an image manifest").hexdigest()
    from hub_service import registry_api

    with registry_api.client(settings) as c:
        record = signing.push_signature(settings, c, registry.host, repository, digest)
    body, signature = cosign_signature(registry, repository, digest)
    assert json.loads(body) == {
        "critical": {
            "identity": {"docker-reference": f"{registry.host}/{repository}"},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    assert (record["signature"], base64.b64decode(record["payload"])) == (signature, body)
    with serve_app(create_app(settings, run_migrations=False)) as url:
        key = httpx.get(f"{url}/api/v1/signing-key").text
    assert key.startswith("-----BEGIN PUBLIC KEY-----")
    assert openssl_verifies(key, body, signature, tmp_path)
    assert not openssl_verifies(key, body.replace(b"thing", b"other"), signature, tmp_path)
    # the key is kept: a second Hub on the same data folder signs with the same one
    assert (settings.data_dir / "signing" / "cosign.key").stat().st_mode & 0o777 == 0o600
    assert signing.public_key(settings) == key
    reference = f"{registry.host}/{repository}"
    assert signing.verify_signature(key, body, signature, reference, digest) is None
    other = "sha256:" + "0" * 64
    assert "not of" in str(signing.verify_signature(key, body, signature, reference, other))
    stranger = HubSettings(data_dir=tmp_path / "elsewhere")
    assert "does not verify" in str(
        signing.verify_signature(signing.public_key(stranger), body, signature, reference, digest)
    )


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_the_pipeline_signs_what_it_publishes_and_never_publishes_over_it(tmp_path: Path) -> None:
    _needs_docker()
    registry = test_registry()
    namespace = f"{registry.host}/t{uuid.uuid4().hex[:10]}"
    settings = _settings(tmp_path, registry, namespace, builder="container", statistical_episodes=5)
    factory = sessionmaker_for(make_engine(settings.database_url))
    index_source(factory, LocalSource(make_envs(Path(str(settings.local_source)), "echo_env")))
    assert Worker(settings, factory).run_until_idle() == ["passed"]
    echo = verdicts(factory)["echo_env"]
    repository = f"{namespace.split('/', 1)[1]}/local/echo_env"
    digest = echo.image_digest
    assert digest and manifest_digest(registry, repository, echo.sha) == (200, digest)

    # the registry holds cosign's signature of that digest, and OpenSSL verifies it with the Hub's key
    body, signature = cosign_signature(registry, repository, digest)
    assert json.loads(body)["critical"]["image"]["docker-manifest-digest"] == digest
    statuses = {r["check_id"]: r for r in echo.rfc008["results"]}
    assert statuses["hub.cosign_signature"]["status"] == "pass", statuses["hub.cosign_signature"]
    assert statuses["hub.immutable_versioning"]["status"] == "pass", statuses["hub.immutable_versioning"]
    assert echo.rfc008["levels_run"] == [1, 2, 3, 4]
    with serve_app(create_app(settings, run_migrations=False)) as url:
        key = httpx.get(f"{url}/api/v1/signing-key").text
        assert openssl_verifies(key, body, signature, tmp_path)
        record = httpx.get(f"{url}/api/v1/envs/local/echo_env/resolve").json()
        assert record["image"].endswith(f"@{digest}") and record["signature"]["verified"] is True
        assert record["signature"]["signature"] == signature

        # published again (a re-run): the tag holds the recorded digest, so nothing is pushed
        built = BuildOutput(builder="container", image_ref=echo.image_ref)
        lines: list[str] = []
        again = publish.push_tested_image(settings, built, "local", "echo_env", echo.sha, lines.append, digest)
        assert again.pushed is not None and again.pushed.digest == digest
        assert any("not pushed again" in line for line in lines), lines
        assert [r.status for r in again.results] == ["pass", "pass"]

        # something outside the Hub writes the tag: the Hub does not publish over it, and says so
        base = os.environ["OPENENV_TEST_BASE_IMAGE"]
        intruder = f"{registry.host}/{repository}:{echo.sha}"
        config = tmp_path / "docker-config"
        config.mkdir()
        subprocess.run(["docker", "tag", base, intruder], check=True, timeout=60)
        try:
            login = subprocess.run(
                ["docker", "--config", str(config), "login", registry.host, "-u", registry.user, "--password-stdin"],
                input=registry.password, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert login.returncode == 0, login.stderr
            pushed = subprocess.run(
                ["docker", "--config", str(config), "push", intruder], capture_output=True, text=True, timeout=300
            )
            assert pushed.returncode == 0, pushed.stderr
        finally:
            subprocess.run(["docker", "rmi", intruder], capture_output=True, timeout=60)
        held = manifest_digest(registry, repository, echo.sha)[1]
        assert held and held != digest
        refused = publish.push_tested_image(settings, built, "local", "echo_env", echo.sha, lines.append, digest)
        assert refused.pushed is None
        immutable, signed = refused.results
        assert immutable.status == "fail" and held in immutable.evidence[0] and immutable.remediation
        assert signed.status == "skip"
        assert manifest_digest(registry, repository, echo.sha)[1] == held  # not written over either

        # a signature that does not verify: the resolve record does not hand the image out
        with factory.begin() as s:
            version = s.get(EnvVersion, echo.id)
            version.signature = {
                **version.signature,
                "signature": base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode(),
            }
        reply = httpx.get(f"{url}/api/v1/envs/local/echo_env/resolve")
        assert reply.status_code == 409 and "does not verify" in reply.text, reply.text
