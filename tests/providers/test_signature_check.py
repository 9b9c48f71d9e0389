"""The client's own ECDSA P-256 check (openenv/client/_signature.py), which `from_hub` runs on the
Hub's signature before it pulls an image: it agrees with OpenSSL on keys and signatures OpenSSL
made, and refuses what is not the key's signature of exactly that image."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from openenv.client._signature import SignatureError, check_record_signature, verify_p256


def _openssl(*args: str, cwd: Path, data: bytes | None = None) -> bytes:
    out = subprocess.run(["openssl", *args], cwd=cwd, input=data, capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


@pytest.fixture()
def keys(tmp_path: Path) -> dict[str, str]:
    """Two P-256 key pairs made by OpenSSL: {"a": key file, "a.pub": PEM, ...}."""
    out: dict[str, str] = {}
    for name in ("a", "b"):
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=tmp_path)
        out[name] = str(tmp_path / f"{name}.key")
        out[f"{name}.pub"] = _openssl("ec", "-in", f"{name}.key", "-pubout", cwd=tmp_path).decode()
    return out


def _sign(key: str, data: bytes, tmp_path: Path) -> bytes:
    (tmp_path / "data").write_bytes(data)
    return _openssl("dgst", "-sha256", "-sign", key, "data", cwd=tmp_path)


def test_it_agrees_with_openssl(keys: dict[str, str], tmp_path: Path) -> None:
    for i in range(8):  # DER lengths vary with the numbers' leading bytes
        data = f"message {i}".encode()
        signature = _sign(keys["a"], data, tmp_path)
        assert verify_p256(keys["a.pub"], data, signature)
        assert not verify_p256(keys["b.pub"], data, signature)
        assert not verify_p256(keys["a.pub"], data + b"!", signature)
    broken = bytearray(_sign(keys["a"], b"x", tmp_path))
    broken[-1] ^= 1
    assert not verify_p256(keys["a.pub"], b"x", bytes(broken))
    assert not verify_p256(keys["a.pub"], b"x", b"\x30\x06\x02\x01\x00\x02\x01\x01")  # r = 0
    assert not verify_p256(keys["a.pub"], b"x", b"not DER")
    with pytest.raises(SignatureError, match="not an EC P-256 public key"):
        rsa = _openssl("genrsa", "2048", cwd=tmp_path)
        (tmp_path / "rsa.key").write_bytes(rsa)
        verify_p256(_openssl("rsa", "-in", "rsa.key", "-pubout", cwd=tmp_path).decode(), b"x", b"")


def test_a_record_is_checked_against_the_image_it_names(
    keys: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image, digest = "127.0.0.1:5000/alice/echo_env", "sha256:" + "a" * 64
    body = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": image},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()
    record = {
        "payload": base64.b64encode(body).decode(),
        "signature": base64.b64encode(_sign(keys["a"], body, tmp_path)).decode(),
    }
    (tmp_path / "a.pub").write_text(keys["a.pub"])
    monkeypatch.setenv("OPENENV_HUB_SIGNING_KEY", str(tmp_path / "a.pub"))
    monkeypatch.delenv("OPENENV_ALLOW_UNSIGNED", raising=False)
    hub = "http://127.0.0.1:1"  # never asked: the key is pinned
    assert "verified" in check_record_signature(hub, f"{image}@{digest}", digest, record)
    other = "sha256:" + "b" * 64
    with pytest.raises(SignatureError, match=r"names .* not "):
        check_record_signature(hub, f"{image}@{other}", other, record)
    with pytest.raises(SignatureError, match=r"names .* not "):
        check_record_signature(hub, f"127.0.0.1:5000/mallory/echo_env@{digest}", digest, record)
    (tmp_path / "b.pub").write_text(keys["b.pub"])
    monkeypatch.setenv("OPENENV_HUB_SIGNING_KEY", str(tmp_path / "b.pub"))
    with pytest.raises(SignatureError, match="does not verify"):
        check_record_signature(hub, f"{image}@{digest}", digest, record)
    with pytest.raises(SignatureError, match=r"unsigned .* OPENENV_ALLOW_UNSIGNED=1"):
        check_record_signature(hub, f"{image}@{digest}", digest, None)
    monkeypatch.setenv("OPENENV_ALLOW_UNSIGNED", "1")
    assert "not signed" in check_record_signature(hub, f"{image}@{digest}", digest, None)
