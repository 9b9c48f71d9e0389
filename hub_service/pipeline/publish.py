"""Publish to a registry: push the exact image the smoke stage tested, and keep its digest.

With `OPENENV_HUB_REGISTRY` set, the publish stage tags the tested image
`<registry>/<owner>/<name>:<sha>`, pushes it with the Hub's credentials and keeps the digest the
registry reports (`sha256:...`); the resolve record then names `<registry>/<owner>/<name>@<digest>`,
which any engine can pull and check, whatever happens to the tag later. Images of yanked
revisions stay in the registry (pins must keep working); the record flags them.

A registry that is down, unreachable or refuses the Hub's credentials is the infrastructure's
trouble, never the env's: `push_tested_image` raises `Transient` (code "registry") and the version
waits, to be run again with backoff once the registry answers.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from hub_service.pipeline.stages import BuildOutput, StageLog, Transient
from hub_service.settings import HubSettings
from openenv.images._signs import pushed_digest

__all__ = ["REGISTRY", "Pushed", "push_tested_image", "registry_repository"]

log = logging.getLogger("hub_service.pipeline")

REGISTRY = "registry"  # the waiting code of a version whose push the registry did not take
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


def push_tested_image(
    settings: HubSettings, built: BuildOutput, owner: str, name: str, sha: str, stage_log: StageLog
) -> Pushed | None:
    """Push the image `built` names to the configured registry; None when there is nothing to do
    (no registry configured, or a revision built as a process, which has no image).

    Raises:
        Transient: the registry is down, unreachable, refuses the credentials or times out, or the
            Docker engine does not answer.
    """
    if not settings.registry or built.builder != "docker" or not built.image_ref:
        return None
    try:
        import docker
    except ImportError as exc:  # the Hub's install has it; a broken install is the machine's trouble
        raise Transient(f"the docker SDK is missing ({exc})", code=Transient.NO_ENGINE) from exc
    repository = registry_repository(settings.registry, owner, name)
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
        raise Transient(f"the Docker engine failed while pushing to {settings.registry}: {exc}", code=REGISTRY) from exc
    except OSError as exc:  # requests' connection errors to the engine, timeouts
        raise Transient(f"pushing to {settings.registry} failed: {exc}", code=REGISTRY) from exc
    finally:
        client.close()
    stage_log(f"pushed: {repository}@{digest}")
    return Pushed(registry_ref=registry_ref, digest=digest)


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
