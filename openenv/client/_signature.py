"""`from_hub`'s check of the Hub's signature before it runs an image the Hub published.

The Hub signs each image it pushes to its registry, by digest, in cosign's key-based format, and
its resolve record carries the signature (docs/hub-api.md, "Resolve"). Before pulling
`<registry>/<owner>/<name>@<digest>`, the client checks that the payload names exactly that
repository and digest and that the signature verifies with the Hub's public key:

- the key is OPENENV_HUB_SIGNING_KEY (a PEM file) when set; otherwise the Hub's own
  (`GET <hub>/api/v1/signing-key`), kept on first use in `<cache>/hub-keys/` and used from there
  afterwards (trust on first use, as SSH does): a Hub whose key changed is refused until the
  kept file is deleted;
- an image the Hub published unsigned (before it signed images) is refused unless
  OPENENV_ALLOW_UNSIGNED=1.

ECDSA P-256 / SHA-256 verification is written out here (public values only: no secret is ever
handled, so no constant-time care is needed) because the client's base install has no
cryptography library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import urllib.request
from typing import Any

from openenv.client import _settings

__all__ = ["SignatureError", "check_record_signature", "verify_p256"]

# The curve P-256 (FIPS 186-4, D.1.2.3).
_P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_A = _P - 3
_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)
# DER of a SubjectPublicKeyInfo for id-ecPublicKey on prime256v1, up to its uncompressed point.
_SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")

Point = tuple[int, int] | None  # None: the point at infinity


class SignatureError(Exception):
    """The image's signature is missing or does not hold; the message says what to do."""


def _add(p: Point, q: Point) -> Point:
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0]:
        if (p[1] + q[1]) % _P == 0:
            return None
        slope = (3 * p[0] * p[0] + _A) * pow(2 * p[1], -1, _P) % _P
    else:
        slope = (q[1] - p[1]) * pow(q[0] - p[0], -1, _P) % _P
    x = (slope * slope - p[0] - q[0]) % _P
    return x, (slope * (p[0] - x) - p[1]) % _P


def _mul(k: int, p: Point) -> Point:
    out: Point = None
    while k:
        if k & 1:
            out = _add(out, p)
        p = _add(p, p)
        k >>= 1
    return out


def _public_point(pem: str) -> tuple[int, int]:
    lines = [line.strip() for line in pem.strip().splitlines()]
    if not lines or lines[0] != "-----BEGIN PUBLIC KEY-----" or lines[-1] != "-----END PUBLIC KEY-----":
        raise SignatureError("the Hub's key is not a PEM public key")
    try:
        der = base64.b64decode("".join(lines[1:-1]), validate=True)
    except binascii.Error:
        raise SignatureError("the Hub's key is not valid base64 PEM") from None
    if len(der) != len(_SPKI_PREFIX) + 65 or not der.startswith(_SPKI_PREFIX) or der[len(_SPKI_PREFIX)] != 4:
        raise SignatureError("the Hub's key is not an EC P-256 public key (cosign's key type)")
    point = der[len(_SPKI_PREFIX) + 1 :]
    x, y = int.from_bytes(point[:32], "big"), int.from_bytes(point[32:], "big")
    if not (x < _P and y < _P and (y * y - x * x * x - _A * x - _B) % _P == 0):
        raise SignatureError("the Hub's key is not a point of P-256")
    return x, y


def _der_signature(raw: bytes) -> tuple[int, int]:
    """(r, s) of a DER `SEQUENCE { INTEGER r, INTEGER s }` (short lengths: P-256's always are)."""
    if len(raw) < 8 or raw[0] != 0x30 or raw[1] != len(raw) - 2:
        raise ValueError("not a DER sequence")
    out, at = [], 2
    for _ in range(2):
        if raw[at] != 0x02 or raw[at + 1] > 33:
            raise ValueError("not a DER integer")
        size = raw[at + 1]
        out.append(int.from_bytes(raw[at + 2 : at + 2 + size], "big"))
        at += 2 + size
    if at != len(raw):
        raise ValueError("bytes after the signature")
    return out[0], out[1]


def verify_p256(public_pem: str, message: bytes, signature_der: bytes) -> bool:
    """Whether `signature_der` is an ECDSA P-256 signature of SHA-256(`message`) by the key."""
    q = _public_point(public_pem)
    try:
        r, s = _der_signature(signature_der)
    except (ValueError, IndexError):
        return False
    if not (0 < r < _N and 0 < s < _N):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")
    w = pow(s, -1, _N)
    point = _add(_mul(e * w % _N, _G), _mul(r * w % _N, q))
    return point is not None and point[0] % _N == r


def _hub_key(hub_url: str) -> tuple[str, str]:
    """(PEM, where it came from) of the key the Hub's signatures are checked with."""
    configured = _settings.hub_signing_key()
    if configured is not None:
        try:
            return configured.read_text(), f"OPENENV_HUB_SIGNING_KEY ({configured})"
        except OSError as exc:
            raise SignatureError(f"OPENENV_HUB_SIGNING_KEY names {configured}, which cannot be read ({exc})") from None
    kept = _settings.cache_dir() / "hub-keys" / (hashlib.sha256(hub_url.encode()).hexdigest()[:20] + ".pem")
    if kept.is_file():
        return kept.read_text(), f"the key kept at first use of {hub_url} ({kept})"
    request = urllib.request.Request(f"{hub_url}/api/v1/signing-key", headers={"Accept": "application/x-pem-file"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            pem = reply.read(16_384).decode()
    except OSError as exc:
        raise SignatureError(f"{hub_url} did not give its signing key ({exc}); set OPENENV_HUB_SIGNING_KEY") from None
    _public_point(pem)  # a key, before it is kept
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(pem)
    return pem, f"{hub_url}'s key, kept now at {kept}"


def check_record_signature(hub_url: str, image: str, digest: str, signature: Any) -> str:
    """Check the resolve record's signature of `image` (`<repository>@<digest>`); returns what
    checked it, for the log.

    Raises:
        SignatureError: no signature (and unsigned images are not allowed), or one that does not hold.
    """
    if not isinstance(signature, dict):
        if _settings.allow_unsigned():
            return "not signed (OPENENV_ALLOW_UNSIGNED=1)"
        raise SignatureError(
            f"{hub_url} published {image} unsigned (before it signed images): ask for the revision to be published "
            "again, or set OPENENV_ALLOW_UNSIGNED=1 to run it anyway"
        )
    pem, source = _hub_key(hub_url)
    try:
        body = base64.b64decode(str(signature.get("payload")), validate=True)
        raw = base64.b64decode(str(signature.get("signature")), validate=True)
        critical = json.loads(body)["critical"]
        named = f"{critical['identity']['docker-reference']}@{critical['image']['docker-manifest-digest']}"
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise SignatureError(f"{hub_url}'s signature of {image} is not cosign's signature of an image") from None
    if named != image or not image.endswith(f"@{digest}"):
        raise SignatureError(f"{hub_url}'s signature names {named}, not {image}: the image is not run")
    if not verify_p256(pem, body, raw):
        raise SignatureError(
            f"the signature of {image} does not verify with {source}: the image is not run (if the Hub's operator "
            "changed its key, delete the kept key file)"
        )
    return f"signature verified with {source}"
