"""Building environment images on the container engine (`openenv.engines`): on Docker with BuildKit
where a client for it is installed (what Spaces build with: `RUN --mount=type=cache`, heredocs),
else the classic builder; on Podman through its API, where buildah reads BuildKit's syntax itself.

An env's Dockerfile installs the runtime with `pip install "${OPENENV_SDK}"`, which defaults to the
published package. When this SDK runs from a source checkout (this repository), `build_image`
builds a wheel of the local source, stages it in a copy of the build context and points
`OPENENV_SDK` at it, so images of in-repo envs carry the SDK being developed, not a release.
Every base image is made sure of before the build (see `_base`), and a failure is told apart:
the env's Dockerfile, or the machine (`ImageBuildError.reason`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv.dockerfile import base_images, needs_buildkit, scope_cache_mounts
from openenv.images._base import LOCAL_BASE_IMAGE, ensure_base_images, with_stand_ins
from openenv.images._builders import (
    BuildSpec,
    Overgrown,
    StepFailed,
    TimedOut,
    buildkit_build,
    buildkit_command,
    classic_build,
)
from openenv.images._cgroup import restore_leftover_limits, step_cgroup
from openenv.images._compare import LayerDifference, compare_images
from openenv.images._engine_trouble import (
    LABEL_PREFIX,
    docker_client,
    engine_age_s,
    engine_epoch,
    engine_settles,
    engine_trouble,
    is_transport_error,
)
from openenv.images._errors import BuildResult, ImageBuildError
from openenv.images._netcheck import NetworkProbe, network_trouble
from openenv.images._sdk import SDK_DIR, dockerfile_takes_sdk, local_sdk_wheel, source_checkout, stage_context
from openenv.images._signs import failed_step

__all__ = [
    "LABEL_PREFIX",
    "LOCAL_BASE_IMAGE",
    "BuildResult",
    "ImageBuildError",
    "LayerDifference",
    "NetworkProbe",
    "base_images",
    "build_image",
    "buildkit_command",
    "compare_images",
    "engine_epoch",
    "local_sdk_wheel",
    "restore_leftover_limits",
    "source_checkout",
]


def build_image(
    env_dir: str | Path,
    tag: str,
    *,
    build_args: dict[str, str] | None = None,
    base_image: str | None = None,
    sdk: str = "auto",
    labels: dict[str, str] | None = None,
    on_log: Callable[[str], None] | None = None,
    client: Any = None,
    timeout_s: float = 1800,
    dockerfile: str | None = None,
    container_limits: dict[str, Any] | None = None,
    network_mode: str | None = None,
    builder: str = "auto",
    pids_limit: int | None = None,
    disk_limit_mb: int | None = None,
    offline: bool = False,
    cache_scope: str | None = None,
    no_cache: bool = False,
    network_probe: NetworkProbe | None = None,
) -> BuildResult:
    """Build `env_dir`'s Dockerfile into `tag`.

    Args:
        env_dir: the env folder (its Dockerfile and files are the build context).
        tag: image tag to give the result.
        build_args: extra `--build-arg`s.
        base_image: value for `ARG BASE_IMAGE` (e.g. a local base when no registry is reachable).
        sdk: "auto" (local source wheel when running from a checkout and the Dockerfile takes
            OPENENV_SDK), "local" (always the local wheel), or "published" (leave the default).
        labels: image labels (ours are added under `org.openenv.*`).
        on_log: called with each line of build output, for progress.
        client: a `docker.DockerClient` (default: from the environment).
        timeout_s: the whole build's time limit.
        dockerfile: the Dockerfile's path inside `env_dir` (default "Dockerfile"; upstream's
            layout keeps it at "server/Dockerfile", still with the env folder as context).
        container_limits: limits of the build's RUN steps: `memory` in bytes.
        network_mode: the network of the build's RUN steps (default: the engine's). BuildKit
            takes only "default", "none" and "host"; the classic builder also a network's name.
        builder: "auto" (BuildKit when a client for it is installed, else classic), "buildkit"
            or "classic".
        pids_limit: the most processes the build's RUN steps may run at once. With BuildKit it is
            set on the engine's BuildKit cgroup, so it bounds all BuildKit builds of the engine
            together; the classic builder's steps run under a cgroup of the build's own. Both need
            root and a local engine (the log says when it is not enforced); a step that reached it
            is named in the log ("a RUN step hit the build's process cap of N").
        disk_limit_mb: stop the build once the engine's disk has grown by this much since it
            began (polled twice a second; needs a local engine whose data folder this process
            can see; concurrent writers on that disk count too).
        offline: the build is kept off the network on purpose (`network_mode="none"` as a policy):
            a step that fails for want of a network is then the env's failure, not an outage.
        cache_scope: give every `RUN --mount=type=cache` an id under this scope, so that builds of
            other scopes on the engine never share its content (`openenv.dockerfile.scope_cache_mounts`;
            the Hub scopes by env). The ids are in `BuildResult.cache_mounts`.
        no_cache: build every step anew (no layer of an earlier build reused).
        network_probe: how to confine the container that checks the build's network after a RUN
            step failed (`openenv.images._netcheck`: the runtime, labels for the reaper).

    Raises:
        ImageBuildError: no Dockerfile, no Docker engine, or the build failed (with its log and
            a `reason` that says whether the env or the machine is at fault).
    """
    env_dir = Path(env_dir).resolve()
    dockerfile_rel = dockerfile or "Dockerfile"
    if not (env_dir / dockerfile_rel).is_file():
        raise ImageBuildError(
            f"no {dockerfile_rel} in {env_dir}; add one (see `openenv init`) or pass the env's folder",
            reason=ImageBuildError.NO_DOCKERFILE,
        )
    if builder not in ("auto", "buildkit", "classic"):
        raise ImageBuildError(
            f"builder must be 'auto', 'buildkit' or 'classic', not {builder!r}", reason=ImageBuildError.SDK
        )
    if sdk not in ("auto", "local", "published"):
        raise ImageBuildError(f"sdk must be 'auto', 'local' or 'published', not {sdk!r}", reason=ImageBuildError.SDK)
    args = dict(build_args or {})
    if base_image:
        args.setdefault("BASE_IMAGE", base_image)
    client = client or docker_client()
    text = (env_dir / dockerfile_rel).read_text(encoding="utf-8", errors="replace")
    scoping = scope_cache_mounts(text, cache_scope) if cache_scope is not None else None
    if scoping is not None:
        if scoping.unscoped:
            raise ImageBuildError(
                f"{dockerfile_rel} {scoping.unscoped[0]}: a cache mount outside the RUN's leading flags, which "
                "this builder cannot keep to the env's own cache; put --mount flags right after RUN",
                reason=ImageBuildError.FAILED,
            )
        for line in scoping.dropped:
            if on_log is not None:
                on_log(
                    f"{dockerfile_rel} {line}: a cache mount with a variable in it is left out (the step runs without it)"
                )
    rewritten = scoping is not None and scoping.text != text
    text = scoping.text if scoping is not None else text
    from openenv.engines import engine_of

    eng = engine_of(client)
    kit = _choose_builder(eng, builder, text, dockerfile_rel)
    stand_ins = ensure_base_images(client, text, args, explicit_base=bool(args.get("BASE_IMAGE")), on_log=on_log)
    context, used_sdk = env_dir, "published"
    if sdk == "local" or (
        sdk == "auto" and source_checkout() is not None and dockerfile_takes_sdk(env_dir, dockerfile_rel)
    ):
        wheel = local_sdk_wheel()
        context = stage_context(env_dir, wheel)
        args.setdefault("OPENENV_SDK", f"/app/env/{SDK_DIR}/{wheel.name}[server]")
        used_sdk = f"local:{wheel.name}"
    own_dockerfile = None
    if stand_ins or rewritten:  # this build's own copy of the Dockerfile (FROM the stand-ins: the engine's
        import tempfile  # names stay as they are; its cache mounts scoped)

        own_dockerfile = Path(tempfile.mkdtemp(prefix="openenv-dockerfile-")) / "Dockerfile"
        own_dockerfile.write_text(with_stand_ins(text, stand_ins, args) if stand_ins else text, encoding="utf-8")
    memory = (container_limits or {}).get("memory")
    log: list[str] = []
    start = time.monotonic()

    def emit(line: str) -> None:
        log.append(line)
        if on_log is not None:
            on_log(line)

    guard = _disk_guard(client, disk_limit_mb, emit) if disk_limit_mb else None
    began = engine_epoch(client)  # a restart at any point of the build (either attempt) is the engine's doing
    try:
        with step_cgroup(client, bool(kit), memory, pids_limit, emit) as (cgroup_parent, process_cap):
            for attempt in (1, 2):
                spec = BuildSpec(
                    context,
                    str(own_dockerfile) if own_dockerfile else dockerfile_rel,
                    tag,
                    args,
                    {f"{LABEL_PREFIX}.built-by": "openenv", f"{LABEL_PREFIX}.env-dir": env_dir.name, **(labels or {})},
                    start + timeout_s,
                    memory=memory,
                    network_mode=network_mode,
                    nocache=no_cache or attempt > 1,
                    guard=guard,
                    cgroup_parent=cgroup_parent,
                    engine_env=eng.cli_env({}),
                )
                epoch = began if began is not None else engine_epoch(client)
                try:
                    if kit:
                        buildkit_build(kit, spec, emit)
                    else:
                        classic_build(client, spec, emit)
                    break
                except Overgrown as over:
                    emit(f"the build was stopped: {over}")
                    _remove_quietly(client, tag)
                    raise ImageBuildError(
                        f"building {tag} was stopped: {over}", "\n".join(log), reason=ImageBuildError.TOO_BIG
                    ) from None
                except TimedOut:
                    raise ImageBuildError(
                        f"building {tag} took longer than {timeout_s:g}s; the build was stopped",
                        "\n".join(log),
                        reason=ImageBuildError.TIMEOUT,
                    ) from None
                except StepFailed as failed:
                    # Whose trouble it is comes from the engine's API (it answers, it did not restart, it did not
                    # just start) and a probe container, never from the log's words: a step can print anything.
                    joined = "\n".join([*log, failed.message])
                    trouble = engine_trouble(client, epoch, joined)
                    if trouble is None and process_cap is not None and process_cap.hit():
                        raise _process_cap_error(tag, process_cap.cap, failed.exit_code, emit, log) from None
                    refused = False
                    if trouble is None and failed.exit_code is not None:
                        trouble, refused, unseen = network_trouble(
                            client, network_mode, joined, offline=offline, probe=network_probe
                        )
                        if unseen is not None:
                            emit(f"{unseen}: the step's failure is taken as the env's")
                    # Even an exit code is no proof the step ran: a young engine's runc may fail to start the
                    # step's container ("exit code: 1"). The revision waits and runs again once the engine is older.
                    if trouble is None and _engine_starting(client):
                        from openenv.engines import engine_of

                        trouble = ImageBuildError(
                            f"the {engine_of(client).label} had started less than {_ENGINE_WARMUP_S:.0f}s before this build failed, while "
                            "it may still fail to start a step's container; the build will be tried again",
                            joined,
                            reason=ImageBuildError.ENGINE_LOST,
                        )
                    if trouble is None and ((failed.exit_code is None and attempt == 2) or refused):
                        # The engine failed the build twice outside the Dockerfile's commands, or a step failed and
                        # the engine could not run a plain container from the base image either: before the env
                        # is blamed, watch the engine a few seconds more. A stopping engine fails to start a step's
                        # container while its API still answers ("runc run failed ... libnetwork"), and goes away
                        # (or comes back anew) right after.
                        trouble = engine_settles(client, epoch, joined, _ENGINE_SETTLE_S)
                    if trouble is not None:
                        raise trouble from None
                    if failed.exit_code is None and attempt == 1:
                        # Not a step of the Dockerfile exiting non-zero: the engine failed it (a layer left broken by an
                        # unclean stop, say). Once more without the cache before the env is blamed.
                        emit(
                            f"the engine failed the build outside the Dockerfile's commands ({failed.message}); trying once more "
                            "without the cache"
                        )
                        continue
                    step = failed_step(log, failed.message)
                    message = step.describe() if step else failed.message
                    if failed.exit_code is not None:
                        message += f" (exit code {failed.exit_code})"
                    if failed.exit_code == 137 and memory:
                        message = f"a RUN step was killed (exit code 137): it used more than the build's memory limit of {memory >> 20} MiB"
                    raise ImageBuildError(
                        f"building {tag} failed at {message}" if step else f"building {tag} failed: {message}",
                        "\n".join(log),
                        exit_code=failed.exit_code,
                        step=step,
                    ) from None
                except ImageBuildError:
                    raise
                except Exception as exc:  # transport errors and docker.errors.*: the engine's trouble, or the build's
                    trouble = engine_trouble(client, epoch, "\n".join(log), lost=is_transport_error(exc))
                    if trouble is not None:
                        raise trouble from exc
                    raise ImageBuildError(f"building {tag} failed: {exc}", "\n".join(log)) from exc
            if process_cap is not None and process_cap.hit():  # the step took the refusal in its stride
                emit(f"{_process_cap_words(process_cap.cap)}; the build went on")
        try:
            image_id = str(client.images.get(tag).id)
        except Exception as exc:
            raise engine_trouble(client, None, "\n".join(log), lost=True) or ImageBuildError(
                f"building {tag} reported success but the engine has no such image: {exc}", "\n".join(log)
            ) from exc
    finally:
        import shutil

        if context != env_dir:
            shutil.rmtree(context, ignore_errors=True)
        if own_dockerfile is not None:
            shutil.rmtree(own_dockerfile.parent, ignore_errors=True)
    return BuildResult(
        tag=tag,
        image_id=image_id,
        seconds=time.monotonic() - start,
        log=log,
        sdk=used_sdk,
        builder="buildkit" if kit else "classic",
        cache_mounts=scoping.scoped if scoping is not None else [],
        cache_mounts_dropped=scoping.dropped if scoping is not None else [],
    )


_ENGINE_WARMUP_S = 120.0
_ENGINE_SETTLE_S = 8.0


def _engine_starting(client: Any) -> bool:
    """The engine started less than _ENGINE_WARMUP_S ago (its own start time, from its API): right
    after a restart it may fail to start a step's container (its network hook not up yet)."""
    # Right after a restart the engine may not list its default bridge yet (no age to read): ask again
    # for a few seconds rather than take an engine still coming up for one that is not.
    deadline = time.monotonic() + 10.0
    while (age := engine_age_s(client)) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return age is not None and age < _ENGINE_WARMUP_S


def _process_cap_words(cap: int) -> str:
    return f"a RUN step hit the build's process cap of {cap}: the kernel refused it more processes"


def _process_cap_error(
    tag: str, cap: int, exit_code: int | None, emit: Callable[[str], None], log: list[str]
) -> ImageBuildError:
    """A step failed while the build's steps were at their process cap: the refusal, named in the log."""
    words = _process_cap_words(cap)
    emit(words)
    code = f" (exit code {exit_code})" if exit_code is not None else ""
    return ImageBuildError(
        f"building {tag} failed: {words}{code}; start fewer processes at once",
        "\n".join(log),
        reason=ImageBuildError.PROCESS_CAP,
        exit_code=exit_code,
    )


def _disk_guard(client: Any, cap_mb: int, emit: Callable[[str], None]) -> Callable[[], str | None] | None:
    """A check that says when the engine's disk grew past `cap_mb` since now; None (with a note
    in the log) when the engine's data folder is not visible here."""
    import os

    from openenv.engines import engine_of

    try:
        root = str(client.info().get("DockerRootDir") or "")
        start = os.statvfs(root) if root and engine_of(client).local else None
    except OSError:
        start = None
    if start is None:
        emit(
            "note: the build's disk cap is checked only after the build here (the engine's data folder is not visible)"
        )
        return None
    free0 = start.f_bavail * start.f_frsize

    def check() -> str | None:
        now = os.statvfs(root)
        grown = free0 - now.f_bavail * now.f_frsize
        if grown > cap_mb << 20:
            return (
                f"the layer grew past the build's disk cap of {cap_mb} MB ({grown >> 20} MB written so far); "
                "slim the image"
            )
        return None

    emit(f"the build may write at most {cap_mb} MB")
    return check


def _remove_quietly(client: Any, tag: str) -> None:
    try:
        client.images.remove(tag, force=True)
    except Exception:  # nothing was tagged (the usual case), or the engine is busy: nothing to tidy
        return


def _choose_builder(eng: Any, builder: str, text: str, dockerfile_rel: str) -> tuple[str, ...] | None:
    """The BuildKit command to build with, or None for the engine's API (Docker's classic builder;
    Podman's buildah, which reads BuildKit's syntax itself), on engine `eng`."""
    if not eng.buildkit:
        if builder == "buildkit":
            raise ImageBuildError(
                f"builder='buildkit' needs Docker; the {eng.label} builds through its API (builder='auto')",
                reason=ImageBuildError.NO_BUILDKIT,
            )
        return None
    kit = buildkit_command() if builder != "classic" else None
    if kit is None and builder == "buildkit":
        raise ImageBuildError(
            "no BuildKit client here: install the buildx plugin (docker-buildx) or a docker CLI that has BuildKit "
            "built in (Debian's docker.io 20.10), or set OPENENV_DOCKER_CLI",
            reason=ImageBuildError.NO_BUILDKIT,
        )
    if kit is None and needs_buildkit(text):
        raise ImageBuildError(
            f"{dockerfile_rel} uses BuildKit syntax (RUN --mount, heredocs, COPY --link, a # syntax= line) and no "
            "BuildKit client is installed here: install the buildx plugin (docker-buildx) or Debian's docker.io "
            "(its CLI has BuildKit built in), or set OPENENV_DOCKER_CLI",
            reason=ImageBuildError.NO_BUILDKIT,
        )
    return kit
