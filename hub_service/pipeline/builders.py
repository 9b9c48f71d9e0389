"""How a revision is built: a `Builder` is one small protocol, with the container engine (an image,
on Docker or Podman) and the process builder (a cached virtual environment, trusted sources only) behind it.
`choose_builder` picks one from the Hub's settings and the source's trust."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hub_service.catalog.states import BuilderKind
from hub_service.pipeline.stage_kit import StageFailed, plain
from hub_service.queue.errors import Transient, WaitCode
from hub_service.settings import HubSettings

__all__ = [
    "BuildOutput",
    "Builder",
    "ContainerBuilder",
    "ProcessBuilder",
    "cache_scope",
    "choose_builder",
    "engine_available",
    "image_size_mb",
    "image_tag",
]

log = logging.getLogger("hub_service.pipeline")


@dataclass
class BuildOutput:
    builder: str  # a BuilderKind
    image_ref: str | None = None
    python: str | None = None
    seconds: float = 0.0
    cache_scope: str | None = None  # the id scope its RUN cache mounts were given (hub.layer_isolation)
    cache_mounts: list[str] | None = None
    cache_mounts_dropped: list[str] | None = None
    rebuilt: Any = None  # static.reproducible_build: a LayerDifference, or why there is none (str)


class Builder(Protocol):
    kind: BuilderKind

    def build(
        self, settings: HubSettings, folder: Path, owner: str, name: str, sha: str, log: Callable[[str], None]
    ) -> BuildOutput:
        """Build the env in `folder` at `sha`, writing progress to `log`.

        Raises:
            StageFailed: the env does not build (its Dockerfile, its dependencies, its size).
            Transient: the machine failed the build (no engine, engine lost, base image, network).
        """
        ...


class ContainerBuilder:
    """An image built by the container engine, confined (hub_service.sandbox) and capped in size."""

    kind = BuilderKind.CONTAINER

    def build(
        self, settings: HubSettings, folder: Path, owner: str, name: str, sha: str, log: Callable[[str], None]
    ) -> BuildOutput:
        from hub_service.sandbox import build_options
        from openenv.dockerfile import find_dockerfile
        from openenv.engines import engine
        from openenv.images import ImageBuildError, build_image

        start = time.monotonic()
        dockerfile = find_dockerfile(folder)
        if dockerfile is None:
            raise StageFailed(
                "no Dockerfile: a Docker Space needs one at its root (upstream's source layout keeps it at server/Dockerfile, "
                "which is built with the env folder as context)"
            )
        tag = image_tag(settings, owner, name, sha)
        scope = cache_scope(owner, name)
        rel = dockerfile.relative_to(folder).as_posix()
        log(f"building image {tag} from {rel}")
        try:
            result = build_image(
                folder,
                tag,
                base_image=settings.base_image,
                on_log=log,
                timeout_s=settings.build_timeout_s,
                dockerfile=rel,
                labels={"org.openenv.hub.repo": f"{owner}/{name}", "org.openenv.hub.sha": sha},
                cache_scope=scope,  # no env's build reads what another's left in a cache mount
                **build_options(settings),  # memory, processes, disk while it runs, network
            )
        except ImageBuildError as exc:
            if exc.infrastructure:  # its reason code says whose trouble it is, set where it was raised
                raise Transient(str(exc), code=WaitCode(exc.reason)) from exc
            text = str(exc).replace(str(folder), "<the env folder>")  # no path of this worker in what users see
            if exc.step is not None and exc.exit_code != 137:  # the step's command and its first error line: the cause
                code = f" (exit code {exc.exit_code})" if exc.exit_code is not None else ""
                raise StageFailed(plain(f"failed at {exc.step.describe()}{code}")) from exc
            summary = (
                exc.reason != ImageBuildError.FAILED or exc.exit_code == 137
            )  # the message says it better than the log
            setting = _CAP_SETTINGS.get(exc.reason)
            if setting:  # the Hub's cap the build ran into, by the name an operator sets it with
                text += f" ({setting})"
            raise StageFailed(text if summary else _last_error_line(exc.log, text)) from exc
        try:
            size_mb = image_size_mb(tag)
        except Exception as exc:  # the image was built: an engine that stopped answering is the machine's trouble
            if not engine_available():
                raise Transient(
                    f"the {engine().label} stopped answering after the build ({exc})", code=WaitCode.ENGINE_LOST
                ) from exc
            raise
        log(
            f"built {tag} ({result.image_id[:19]}, {size_mb:.0f} MB) in {result.seconds:.1f}s with {result.builder}, SDK {result.sdk}"
        )
        if size_mb > settings.image_max_mb:
            _remove_image(tag)
            over = f"the image is {size_mb:.0f} MB, over the Hub's cap of {settings.image_max_mb} MB; slim the image"
            log(over)
            raise StageFailed(f"{over} ({_CAP_SETTINGS[ImageBuildError.TOO_BIG]})")
        rebuilt = _build_again(settings, folder, tag, rel, scope, log) if settings.reproducible_build_check else None
        return BuildOutput(
            builder=self.kind,
            image_ref=tag,
            rebuilt=rebuilt,
            seconds=time.monotonic() - start,
            cache_scope=scope,
            cache_mounts=result.cache_mounts,
            cache_mounts_dropped=result.cache_mounts_dropped,
        )


_CAP_SETTINGS = {
    "too_big": "OPENENV_HUB_IMAGE_MAX_MB",
    "process_cap": "OPENENV_HUB_BUILD_PIDS",
}  # by ImageBuildError.reason


def cache_scope(owner: str, name: str) -> str:
    """The id scope of an env's RUN cache mounts: its own, shared by its revisions alone."""
    return f"openenv-hub:{owner}/{name}"


class ProcessBuilder:
    """A virtual environment with the env's dependencies, run as a local process: trusted code only."""

    kind = BuilderKind.PROCESS

    def build(
        self, settings: HubSettings, folder: Path, owner: str, name: str, sha: str, log: Callable[[str], None]
    ) -> BuildOutput:
        from openenv.client.providers import ProcessProvider

        start = time.monotonic()
        log("preparing a virtual environment for the env's dependencies")
        try:
            provider = ProcessProvider(folder)
            python = provider.interpreter
        except Exception as exc:
            raise StageFailed(f"installing the dependencies failed: {exc}") from exc
        log(f"interpreter: {python}")
        return BuildOutput(builder=self.kind, python=str(python), seconds=time.monotonic() - start)


_BUILDERS: dict[BuilderKind, Builder] = {
    BuilderKind.CONTAINER: ContainerBuilder(),
    BuilderKind.PROCESS: ProcessBuilder(),
}


def choose_builder(settings: HubSettings, trusted: bool) -> Builder:
    """The builder for a revision; untrusted code never runs outside a container.

    Raises:
        StageFailed: the revision is untrusted and the Hub builds only with processes.
    """
    if settings.builder == BuilderKind.PROCESS:
        if not trusted:
            raise StageFailed(
                "this revision is not from a trusted source: it is built and run only in containers, and the Hub's builder is 'process'"
            )
        return _BUILDERS[BuilderKind.PROCESS]
    if settings.builder == BuilderKind.CONTAINER or not trusted:
        return _BUILDERS[BuilderKind.CONTAINER]
    return _BUILDERS[BuilderKind.CONTAINER if engine_available() else BuilderKind.PROCESS]


def image_tag(settings: HubSettings, owner: str, name: str, sha: str) -> str:
    slug = re.sub(r"[^a-z0-9_.-]+", "-", f"{owner}-{name}".lower()).strip("-.")
    return f"{settings.image_prefix}/{slug}:{sha[:12]}"


def engine_available() -> bool:
    """Whether the container engine (`openenv.engines`, Docker unless set otherwise) answers."""
    from openenv.engines import engine

    try:
        engine().new_client(timeout=5).close()
    except Exception:  # no SDK, no engine, no permission: all mean "not available here"
        return False
    return True


def image_size_mb(tag: str) -> float:
    from openenv.engines import engine

    return float(engine().client().images.get(tag).attrs.get("Size", 0)) / 2**20


def _build_again(
    settings: HubSettings, folder: Path, tag: str, rel: str, scope: str, log: Callable[[str], None]
) -> Any:
    """static.reproducible_build: the revision built a second time, every step anew, and compared
    with the first build layer by layer (`openenv.images.compare_images`); the copy is removed.
    Returns the comparison, or why there is none (the second build's own trouble is not a verdict)."""
    from hub_service.sandbox import build_options
    from openenv.engines import engine
    from openenv.images import ImageBuildError, build_image, compare_images

    again = f"{tag}-rebuild"
    log("building it again from scratch, to compare (static.reproducible_build)")
    try:
        build_image(
            folder,
            again,
            base_image=settings.base_image,
            timeout_s=settings.build_timeout_s,
            dockerfile=rel,
            cache_scope=scope,
            no_cache=True,
            **build_options(settings),
        )
    except ImageBuildError as exc:
        return f"the second build failed ({'the machine' if exc.infrastructure else 'the env'}): {str(exc)[:300]}"
    try:
        found = compare_images(engine().client(), tag, again)
    except Exception as exc:  # the comparison is the Hub's; the first build stands
        return f"the two builds could not be compared: {type(exc).__name__}: {exc}"
    finally:
        _remove_image(again)
    log(
        "the two builds are the same, bit for bit"
        if found.bitwise
        else "the two builds hold the same files (timestamps aside)"
        if found.same_files
        else f"the two builds differ from layer {found.differing_layer} ({found.step}): {', '.join(found.paths[:3])}"
    )
    return found


def _remove_image(tag: str) -> None:
    from openenv.engines import engine

    try:
        engine().client().images.remove(tag, force=True)
    except Exception:  # removal is tidying up; the verdict stands either way
        log.warning("could not remove oversized image %s", tag, exc_info=True)


# BuildKit's closing lines restate which step failed; the step's own last error line says why.
_RESTATED = re.compile(r"executor failed running|did not complete successfully|failed to solve|^-+$|^\s*>\s*\[", re.I)
_STEP_PREFIX = re.compile(r"^#\d+\s+(\d+(\.\d+)?\s+)?")


def _last_error_line(log: str, fallback: str) -> str:
    """The line of a failed build's log that says why (shown to users; never used to classify)."""
    lines = [_STEP_PREFIX.sub("", line).strip() for line in plain(log or "").splitlines()]
    for line in reversed(lines):
        if re.search(r"error|failed|not found|no such", line, re.I) and not _RESTATED.search(line):
            return f"build failed: {line[:300]}"
    return plain(fallback)[:500]
