"""Publish to a registry: push the exact image the smoke stage tested, keep its digest, sign it.

With `OPENENV_HUB_REGISTRY` set, the publish stage tags the tested image
`<registry>/<owner>/<name>:<sha>`, pushes it with the Hub's credentials and keeps the digest the
registry reports (`sha256:...`); the resolve record then names `<registry>/<owner>/<name>@<digest>`,
which any engine can pull and check, whatever happens to the tag later. Images of yanked
revisions stay in the registry (pins must keep working); the record flags them.

A published version's digest never changes (RFC 008's `hub.immutable_versioning`): before pushing,
the stage asks the registry what the version's tag holds. A revision published before is not
pushed again; a tag that holds something else than the digest the Hub recorded is not written
over (the check fails and says what it found); an image collected from the registry is not pushed
again (a rebuild may differ). Each published digest is signed in cosign's key-based format
(hub_service/signing.py) and the signature read back from the registry and verified
(`hub.cosign_signature`).

A registry that is down, unreachable or refuses the Hub's credentials is the infrastructure's
trouble, never the env's: `push_tested_image` raises `Transient` (code "registry") and the version
waits, to be run again with backoff once the registry answers.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from hub_service import registry_api, signing
from hub_service.catalog.states import BuilderKind
from hub_service.pipeline.stages import BuildOutput, StageLog, Transient
from hub_service.settings import HubSettings
from openenv.images._signs import pushed_digest
from openenv.validation.rfc008 import ResultV2

__all__ = ["IMMUTABLE", "REGISTRY", "SIGNED", "Published", "Pushed", "push_tested_image", "registry_repository"]

log = logging.getLogger("hub_service.pipeline")

REGISTRY = "registry"  # the waiting code of a version whose push the registry did not take
IMMUTABLE, SIGNED = "hub.immutable_versioning", "hub.cosign_signature"  # RFC 008's hub lane, decided here
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Registry answers that mean "the registry is not there" or "it refuses us": the infrastructure's doing.
_UNREACHABLE = re.compile(
    r"connection refused|no such host|i/o timeout|dial tcp|connection reset|EOF|timeout|server gave HTTP response|"
    r"service unavailable|bad gateway|50[0-9] ",
    re.I,
)
_REFUSED = re.compile(r"unauthorized|authentication required|no basic auth credentials|denied|forbidden", re.I)


@dataclass(frozen=True)
class Pushed:
    """An image in the registry: the tag it was pushed as, and the digest the registry gave it."""

    registry_ref: str
    digest: str

    @property
    def repository(self) -> str:
        return self.registry_ref.rsplit(":", 1)[0]

    @property
    def pinned(self) -> str:
        """`<registry>/<owner>/<name>@sha256:...`: what clients pull."""
        return f"{self.repository}@{self.digest}"


def registry_repository(registry: str, owner: str, name: str) -> str:
    """`<registry>/<owner>/<name>`, with owner and name made valid repository path components
    (lowercase; runs of other characters become one '-')."""
    return f"{registry}/{_component(owner)}/{_component(name)}"


def _component(text: str) -> str:
    lowered = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    lowered = re.sub(r"[._-]{2,}", "-", lowered).strip("._-")
    return lowered or "x"


@dataclass(frozen=True)
class Published:
    """What the publish stage did: the image in the registry (None: nothing pushed or kept there),
    its signature's record, and the hub lane's two checks of it (RFC 008)."""

    pushed: Pushed | None
    signature: dict[str, Any] | None
    results: list[ResultV2]


def _result(check_id: str, status: str, evidence: str, remediation: str | None = None, **measured: Any) -> ResultV2:
    return ResultV2.model_validate(
        {
            "check_id": check_id,
            "status": status,
            "evidence": [evidence],
            "remediation": remediation,
            "measured": measured,
        }
    )


def _skips(why: str) -> list[ResultV2]:
    return [_result(IMMUTABLE, "skip", why), _result(SIGNED, "skip", why)]


def push_tested_image(
    settings: HubSettings,
    built: BuildOutput,
    owner: str,
    name: str,
    sha: str,
    stage_log: StageLog,
    recorded_digest: str | None = None,
) -> Published:
    """Publish the image `built` names: push it to the configured registry, unless the revision is
    published already (`recorded_digest`: a version's digest never changes, and a push that would
    change it is refused), then sign it by digest (cosign's format) and read the signature back.

    Raises:
        Transient: the registry is down, unreachable, refuses the credentials or times out, the
            container engine does not answer, or the signing key cannot be read.
    """
    if not settings.registry:
        return Published(None, None, _skips("no registry is configured (OPENENV_HUB_REGISTRY): nothing is published"))
    if built.builder != BuilderKind.CONTAINER or not built.image_ref:
        return Published(None, None, _skips("built as a process: there is no image to publish"))
    repository = registry_repository(settings.registry, owner, name)
    host = registry_api.host_of(settings.registry)
    path = repository[len(host) + 1 :]
    with registry_api.client(settings, settings.registry_timeout_s) as http:
        held = _registry(settings, lambda: registry_api.manifest_digest(http, host, path, sha))
        if recorded_digest is not None and held != recorded_digest:
            if held is None:
                why = (
                    f"{path}:{sha} was published at {recorded_digest} and has been collected from the registry "
                    "since: it is not pushed again (a rebuild may differ, and a version's digest never changes)"
                )
                stage_log(why)
                return Published(None, None, [_result(IMMUTABLE, "pass", why), _result(SIGNED, "skip", why)])
            why = (
                f"the registry's {path}:{sha} holds {held}, not the {recorded_digest} this Hub published for the "
                "revision: something outside the Hub wrote the tag; the Hub does not publish over it"
            )
            stage_log(f"refused: {why}")
            fix = "find what wrote to the Hub's registry namespace; the revision keeps resolving to its first digest"
            return Published(
                None, None, [_result(IMMUTABLE, "fail", why, fix, held=held), _result(SIGNED, "skip", why)]
            )
        if recorded_digest is not None:
            digest = recorded_digest
            stage_log(f"{path}:{sha} is published already at {digest}: not pushed again")
            immutable = _result(
                IMMUTABLE, "pass", f"{path}:{sha} still holds {digest}, its first publish", digest=digest
            )
        else:
            digest = _engine_push(settings, built, repository, sha, stage_log)
            now = _registry(settings, lambda: registry_api.manifest_digest(http, host, path, sha))
            first = f"{path}:{sha} published at {digest}" + (
                f" (over {held}, an unrecorded earlier attempt's)" if held else ""
            )
            immutable = (
                _result(IMMUTABLE, "pass", first, digest=digest)
                if now == digest
                else _result(
                    IMMUTABLE,
                    "fail",
                    f"right after the push {path}:{sha} holds {now}, not {digest}: another writer raced the Hub",
                    "find what writes to the Hub's registry namespace",
                    digest=digest,
                    held=now,
                )
            )
        record, signed = _sign(settings, http, host, path, digest, stage_log)
    return Published(Pushed(registry_ref=f"{repository}:{sha}", digest=digest), record, [immutable, signed])


def _sign(
    settings: HubSettings, http: Any, host: str, path: str, digest: str, stage_log: StageLog
) -> tuple[dict[str, Any], ResultV2]:
    """Sign `digest` (unless the registry holds a good signature of it already) and check it as
    the registry gives it back: `hub.cosign_signature`."""
    reference = f"{host}/{path}"
    try:
        key = signing.signer(settings)
    except (OSError, ValueError) as exc:  # the operator's key file: fixed by the operator, then the run goes on
        raise Transient(
            f"the Hub's signing key cannot be used ({exc}); check OPENENV_HUB_SIGNING_KEY_FILE", code=REGISTRY
        ) from exc
    found = _registry(settings, lambda: signing.read_signature(http, host, path, digest))
    if found is None or signing.verify_signature(key.public_pem, found[0], found[1], reference, digest) is not None:
        _registry(settings, lambda: signing.push_signature(settings, http, host, path, digest))
        stage_log(f"signed {reference}@{digest} ({signing.signature_tag(digest)}, key {key.key_id[:16]})")
    back = _registry(settings, lambda: signing.read_signature(http, host, path, digest))
    problem = (
        "the registry holds no signature"
        if back is None
        else signing.verify_signature(key.public_pem, back[0], back[1], reference, digest)
    )
    record = {
        "format": "cosign",
        "tag": f"{reference}:{signing.signature_tag(digest)}",
        "payload": base64.b64encode(back[0]).decode() if back else None,
        "signature": back[1] if back else None,
        "key_id": key.key_id,
    }
    if problem is None:
        return record, _result(
            SIGNED,
            "pass",
            f"{signing.signature_tag(digest)} read back from the registry verifies with the Hub's key",
            key_id=key.key_id,
        )
    return record, _result(
        SIGNED, "fail", f"the signature read back: {problem}", "publish the revision again", key_id=key.key_id
    )


def _registry(settings: HubSettings, call: Any) -> Any:
    """`call()` against the registry's API; its trouble is the infrastructure's (Transient)."""
    try:
        return call()
    except registry_api.RegistryError as exc:
        if exc.refused:
            raise Transient(
                f"the registry {settings.registry} refused the Hub ({exc}); check OPENENV_HUB_REGISTRY_USER "
                "and OPENENV_HUB_REGISTRY_PASSWORD",
                code=REGISTRY,
            ) from exc
        raise Transient(
            f"the registry {settings.registry} is unreachable or in trouble ({exc})", code=REGISTRY
        ) from exc


def _engine_push(settings: HubSettings, built: BuildOutput, repository: str, sha: str, stage_log: StageLog) -> str:
    """Push the tested image through the engine as `<repository>:<sha>`; returns the registry's digest."""
    assert settings.registry is not None and built.image_ref is not None
    try:
        import docker
    except ImportError as exc:  # the Hub's install has it; a broken install is the machine's trouble
        raise Transient(f"the docker SDK is missing ({exc})", code=Transient.NO_ENGINE) from exc
    registry_ref = f"{repository}:{sha}"
    from openenv.engines import engine

    try:
        client = engine().new_client(timeout=settings.registry_timeout_s)
    except Exception as exc:  # ProviderUnavailableError: no engine here
        raise Transient(f"no container engine answers to push the image ({exc})", code=Transient.NO_ENGINE) from exc
    try:
        stage_log(f"pushing {built.image_ref} to {registry_ref}")
        client.api.tag(built.image_ref, repository, tag=sha)
        digest: str | None = None
        try:
            digest = _push(client.api, repository, sha, _auth(settings), settings.registry_timeout_s)
        finally:
            # The registry's tag and digest were only the push's handles: the Hub's own tag is what its image GC
            # tracks, and a reference left here would keep the image on this engine after the GC removed that tag.
            for ref in (registry_ref, f"{repository}@{digest}" if digest else None):
                if ref:
                    with contextlib.suppress(Exception):
                        client.api.remove_image(ref, noprune=True)
    except docker.errors.ImageNotFound as exc:
        raise Transient(
            f"the tested image {built.image_ref} is gone from the engine before its push ({exc})", code=REGISTRY
        ) from exc
    except docker.errors.DockerException as exc:
        raise Transient(
            f"the {engine().label} failed while pushing to {settings.registry}: {exc}", code=REGISTRY
        ) from exc
    except OSError as exc:  # requests' connection errors to the engine, timeouts
        raise Transient(f"pushing to {settings.registry} failed: {exc}", code=REGISTRY) from exc
    finally:
        client.close()
    stage_log(f"pushed: {repository}@{digest}")
    return digest


def _auth(settings: HubSettings) -> dict[str, str] | None:
    if not settings.registry_user:
        return None
    password = settings.registry_password.get_secret_value() if settings.registry_password else ""
    return {"username": settings.registry_user, "password": password}


def _push(api: Any, repository: str, tag: str, auth: dict[str, str] | None, timeout_s: float) -> str:
    """Run the push to its end (within `timeout_s`) and return the digest the registry reported."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            digest: str | None = None
            error: str | None = None
            for message in api.push(repository, tag=tag, auth_config=auth, stream=True, decode=True):
                if not isinstance(message, dict):
                    continue
                if message.get("error"):
                    error = str(message["error"])
                digest = pushed_digest(message) or digest
            outcome["result"] = (digest, error)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"push-{repository}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Transient(
            f"pushing {repository}:{tag} did not finish within {timeout_s:g}s (OPENENV_HUB_REGISTRY_TIMEOUT_S)",
            code=REGISTRY,
        )
    if "error" in outcome:
        raise outcome["error"]
    digest, error = outcome["result"]
    if error:
        if _REFUSED.search(error):
            raise Transient(
                f"the registry refused the Hub's push of {repository}:{tag} ({error}); check OPENENV_HUB_REGISTRY_USER "
                "and OPENENV_HUB_REGISTRY_PASSWORD",
                code=REGISTRY,
            )
        kind = "is unreachable" if _UNREACHABLE.search(error) else "did not take the push"
        raise Transient(f"the registry {kind} ({repository}:{tag}): {error}", code=REGISTRY)
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise Transient(f"the registry reported no digest for {repository}:{tag} (got {digest!r})", code=REGISTRY)
    return digest
