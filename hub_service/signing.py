"""Image signatures in cosign's key-based format: the Hub signs every image it publishes, by digest,
and checks the signature where it hands the image out (RFC 008's `hub.cosign_signature`).

What is signed is cosign's "simple signing" payload, which names the image by repository and
manifest digest:

    {"critical":{"identity":{"docker-reference":"<registry>/<repository>"},
                 "image":{"docker-manifest-digest":"sha256:..."},
                 "type":"cosign container image signature"},"optional":null}

with ECDSA P-256 over SHA-256 (cosign's key type), the signature base64 DER. It is stored beside
the image, as cosign stores it: an OCI manifest tagged `sha256-<hex of the digest>.sig` in the
image's repository, whose one layer is the payload (media type
`application/vnd.dev.cosign.simplesigning.v1+json`) with the signature in its annotation
`dev.cosignproject.cosign/signature`. So `cosign verify --key <the Hub's public key> <image>@<digest>`
accepts it (with `--insecure-ignore-tlog`: the Hub writes no transparency log entry), and anyone
can check it with nothing but the public key (`GET /api/v1/signing-key`) and OpenSSL.

The key: `signing_key_file` (a PEM PKCS#8 EC P-256 private key), else one the Hub makes on first
use in `<data_dir>/signing/cosign.key` (mode 0600) and keeps.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hub_service import registry_api
from hub_service.settings import HubSettings

__all__ = [
    "Signer",
    "payload",
    "public_key",
    "push_signature",
    "read_signature",
    "signature_tag",
    "signer",
    "verify_signature",
]

PAYLOAD_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
ANNOTATION = "dev.cosignproject.cosign/signature"
_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
_CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
_lock = threading.Lock()


def signature_tag(digest: str) -> str:
    """Where cosign keeps the signature of the image `digest`: `sha256-<hex>.sig`."""
    algorithm, _, hexpart = digest.partition(":")
    return f"{algorithm}-{hexpart}.sig"


def payload(docker_reference: str, digest: str) -> bytes:
    """cosign's simple signing payload for the image `docker_reference@digest` (compact JSON)."""
    body = {
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Signer:
    key: Any  # cryptography's EllipticCurvePrivateKey
    public_pem: str
    key_id: str  # sha256 of the public key's DER (SubjectPublicKeyInfo), hex

    def sign(self, data: bytes) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return base64.b64encode(self.key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()


def signer(settings: HubSettings) -> Signer:
    """The Hub's signing key (made and kept on first use when no key file is set).

    Raises:
        ValueError: the key file is not a PEM EC P-256 private key without a password.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = _key_path(settings)
    with _lock:
        if not path.exists() and settings.signing_key_file is None:
            _make_key(path)
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError(f"{path} is not an EC P-256 private key (cosign's key type)")
    public = key.public_key()
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return Signer(key, pem, hashlib.sha256(der).hexdigest())


def public_key(settings: HubSettings) -> str:
    """The Hub's public key (PEM), as `cosign verify --key` takes it."""
    path = _key_path(settings)
    stamp = path.stat().st_mtime_ns if path.exists() else 0
    cached = _public.get(path)
    if cached is None or cached[0] != stamp:
        _public[path] = cached = (stamp, signer(settings).public_pem)
    return cached[1]


_public: dict[Path, tuple[int, str]] = {}


def _key_path(settings: HubSettings) -> Path:
    return settings.signing_key_file or settings.data_dir / "signing" / "cosign.key"


def _make_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    partial.replace(path)
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.with_suffix(".pub").write_bytes(public)


def push_signature(settings: HubSettings, c: httpx.Client, host: str, repository: str, digest: str) -> dict[str, Any]:
    """Sign the image `<host>/<repository>@<digest>` and store the signature beside it (cosign's
    layout); returns the record the revision keeps (tag, payload, signature, key id).

    Raises:
        registry_api.RegistryError: the registry did not take it.
    """
    s = signer(settings)
    body = payload(f"{host}/{repository}", digest)
    signature = s.sign(body)
    layer = registry_api.push_blob(c, host, repository, body)
    config = json.dumps(
        {
            "architecture": "",
            "config": {},
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": [layer]},
        },
        separators=(",", ":"),
    ).encode()
    config_digest = registry_api.push_blob(c, host, repository, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST_TYPE,
            "config": {"mediaType": _CONFIG_TYPE, "size": len(config), "digest": config_digest},
            "layers": [
                {"mediaType": PAYLOAD_TYPE, "size": len(body), "digest": layer, "annotations": {ANNOTATION: signature}}
            ],
        },
        separators=(",", ":"),
    ).encode()
    tag = signature_tag(digest)
    stored = registry_api.put_manifest(c, host, repository, tag, manifest, _MANIFEST_TYPE)
    return {
        "format": "cosign",
        "tag": f"{host}/{repository}:{tag}",
        "manifest_digest": stored,
        "payload": base64.b64encode(body).decode(),
        "signature": signature,
        "key_id": s.key_id,
    }


def read_signature(c: httpx.Client, host: str, repository: str, digest: str) -> tuple[bytes, str] | None:
    """(payload, base64 signature) of the image's signature as the registry holds it; None when it has none.

    Raises:
        registry_api.RegistryError: no answer, or not a signature in cosign's layout.
    """
    found = registry_api.get_manifest(c, host, repository, signature_tag(digest))
    if found is None:
        return None
    try:
        layer = json.loads(found[1])["layers"][0]
        signature, layer_digest = layer["annotations"][ANNOTATION], layer["digest"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise registry_api.RegistryError(f"{signature_tag(digest)} is not a cosign signature: {exc!r}") from exc
    return registry_api.get_blob(c, host, repository, layer_digest), signature


def verify_signature(public_pem: str, body: bytes, signature: str, docker_reference: str, digest: str) -> str | None:
    """None when `signature` is the key's over `body` and `body` names `docker_reference@digest`;
    else what is wrong, in words."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        critical = json.loads(body)["critical"]
        named = (critical["identity"]["docker-reference"], critical["image"]["docker-manifest-digest"])
    except (ValueError, KeyError, TypeError):
        return "the signed payload is not cosign's simple signing payload"
    if named != (docker_reference, digest):
        return f"the signature is of {named[0]}@{named[1]}, not of {docker_reference}@{digest}"
    key = serialization.load_pem_public_key(public_pem.encode())
    assert isinstance(key, ec.EllipticCurvePublicKey)
    try:
        key.verify(base64.b64decode(signature, validate=True), body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return "the signature does not verify with the Hub's key"
    return None
