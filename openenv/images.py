"""Building environment images with the Docker engine (through the `docker` SDK).

An env's Dockerfile installs the runtime with `pip install "${OPENENV_SDK}"`, which defaults to the
published package. When this SDK runs from a source checkout (this repository), `build_image`
builds a wheel of the local source, stages it in a copy of the build context and points
`OPENENV_SDK` at it, so images of in-repo envs carry the SDK being developed, not a release.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.errors import OpenEnvError

__all__ = ["LOCAL_BASE_IMAGE", "BuildResult", "ImageBuildError", "base_images", "build_image", "engine_epoch", "local_sdk_wheel",
           "source_checkout"]

LABEL_PREFIX = "org.openenv"
# The registry-free base image `scripts/base-image` builds from Debian's packages. A Dockerfile whose
# `ARG BASE_IMAGE` default cannot be pulled builds on it when it is in the engine.
LOCAL_BASE_IMAGE = "openenv-local/python:3.11"
_SDK_DIR = ".openenv-sdk"
_IGNORED = (".git", ".venv", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", "*.egg-info", _SDK_DIR)


class ImageBuildError(OpenEnvError):
    """The image could not be built; `log` holds the build output.

    `reason` says whose problem it is: the env's (`FAILED`: a step of its Dockerfile failed;
    `NO_DOCKERFILE`), or the machine's (`NO_ENGINE`: no Docker engine answers; `ENGINE_LOST`: the
    engine went away or restarted during the build; `BASE_IMAGE`: a base image is neither in the
    engine nor pullable; `NETWORK`: the build's containers cannot resolve names at all (DNS down);
    `TIMEOUT`; `SDK`: the local SDK wheel did not build).
    """

    FAILED = "failed"
    NO_DOCKERFILE = "no_dockerfile"
    NO_ENGINE = "no_engine"
    ENGINE_LOST = "engine_lost"
    BASE_IMAGE = "base_image"
    NETWORK = "network"
    TIMEOUT = "timeout"
    SDK = "sdk"
    INFRASTRUCTURE = frozenset({NO_ENGINE, ENGINE_LOST, BASE_IMAGE, NETWORK})

    def __init__(self, message: str, log: str = "", reason: str = FAILED) -> None:
        super().__init__(message)
        self.log = log
        self.reason = reason

    @property
    def infrastructure(self) -> bool:
        """True when the machine, not the env, kept the image from building (retrying may help)."""
        return self.reason in self.INFRASTRUCTURE


@dataclass
class BuildResult:
    tag: str
    image_id: str
    seconds: float
    log: list[str] = field(default_factory=list)
    sdk: str = "published"


def source_checkout() -> Path | None:
    """The repository root when `openenv` is imported from a source checkout, else None."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "openenv-hub"' in pyproject.read_text(encoding="utf-8", errors="replace"):
        return root
    return None


def _source_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted([root / "pyproject.toml", *(root / "openenv").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def local_sdk_wheel(cache_dir: Path | None = None) -> Path:
    """A wheel of the local SDK source, rebuilt only when the source changed.

    Raises:
        ImageBuildError: not a source checkout, or the wheel build failed.
    """
    root = source_checkout()
    if root is None:
        raise ImageBuildError("the local SDK is not a source checkout; build with sdk='published'", reason=ImageBuildError.SDK)
    out = (cache_dir or root / ".cache" / "sdk-wheels") / _source_digest(root)
    wheels = sorted(out.glob("openenv_hub-*.whl"))
    if wheels:
        return wheels[-1]
    out.mkdir(parents=True, exist_ok=True)
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    cmd = [uv, "build", "--wheel", "--out-dir", str(out), str(root)] if Path(uv).exists() else [
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(root)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wheels = sorted(out.glob("openenv_hub-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ImageBuildError(f"building the SDK wheel failed: {proc.stderr[-1500:]}", reason=ImageBuildError.SDK)
    return wheels[-1]


def _stage_context(env_dir: Path, wheel: Path) -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="openenv-build-"))
    # symlinks=True: a link is copied as a link, never as the file it points at (which could be
    # anything on this machine); the build context then holds nothing from outside the folder.
    shutil.copytree(env_dir, ctx, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_IGNORED))
    (ctx / _SDK_DIR).mkdir()
    shutil.copy2(wheel, ctx / _SDK_DIR / wheel.name)
    return ctx


def _dockerfile_takes_sdk(env_dir: Path, dockerfile_rel: str = "Dockerfile") -> bool:
    dockerfile = env_dir / dockerfile_rel
    return dockerfile.is_file() and "OPENENV_SDK" in dockerfile.read_text(encoding="utf-8", errors="replace")


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
        dockerfile: the Dockerfile's path inside `env_dir` (default "Dockerfile"; upstream's
            layout keeps it at "server/Dockerfile", still with the env folder as context).
        timeout_s: the whole build's time limit (also the limit for a step that prints nothing).
        container_limits: resource limits of the build's RUN steps (`memory`, `memswap`, ...).
        network_mode: the network of the build's RUN steps (default: the engine's, `bridge`).

    Raises:
        ImageBuildError: no Dockerfile, no Docker engine, or the build failed (with its log).
    """
    env_dir = Path(env_dir).resolve()
    dockerfile_rel = dockerfile or "Dockerfile"
    if not (env_dir / dockerfile_rel).is_file():
        raise ImageBuildError(f"no {dockerfile_rel} in {env_dir}; add one (see `openenv init`) or pass the env's folder",
                              reason=ImageBuildError.NO_DOCKERFILE)
    args = dict(build_args or {})
    if base_image:
        args.setdefault("BASE_IMAGE", base_image)
    context = env_dir
    used_sdk = "published"
    if sdk not in ("auto", "local", "published"):
        raise ImageBuildError(f"sdk must be 'auto', 'local' or 'published', not {sdk!r}", reason=ImageBuildError.SDK)
    if sdk == "local" or (sdk == "auto" and source_checkout() is not None and _dockerfile_takes_sdk(env_dir, dockerfile_rel)):
        wheel = local_sdk_wheel()
        context = _stage_context(env_dir, wheel)
        args.setdefault("OPENENV_SDK", f"/app/env/{_SDK_DIR}/{wheel.name}[server]")
        used_sdk = f"local:{wheel.name}"
    client = client or _docker_client()
    dockerfile_text = (env_dir / dockerfile_rel).read_text(encoding="utf-8", errors="replace")
    _ensure_base_images(client, dockerfile_text, args, explicit_base=base_image is not None or "BASE_IMAGE" in (build_args or {}), on_log=on_log)
    all_labels = {f"{LABEL_PREFIX}.built-by": "openenv", f"{LABEL_PREFIX}.env-dir": env_dir.name, **(labels or {})}
    log: list[str] = []
    start = time.monotonic()

    def emit(line: str) -> None:
        log.append(line)
        if on_log is not None:
            on_log(line)

    try:
        for attempt in (1, 2):
            epoch = engine_epoch(client)
            try:
                image_id = _classic_build(client, context, dockerfile_rel, tag, args, all_labels, start + timeout_s, container_limits,
                                          network_mode, emit, nocache=attempt > 1)
                break
            except _TimedOut:
                raise ImageBuildError(f"building {tag} took longer than {timeout_s:g}s; the build was stopped", "\n".join(log),
                                      reason=ImageBuildError.TIMEOUT) from None
            except _StepFailed as failed:
                text = "\n".join([*log, failed.message])
                trouble = _engine_trouble(client, epoch, text) or _network_trouble(client, dockerfile_text, args, network_mode, text)
                if trouble is not None:
                    raise trouble from None
                if failed.exit_code is None and attempt == 1:
                    # Not a step of the Dockerfile exiting non-zero: the engine failed it (a layer left broken by an
                    # unclean stop, say). Once more without the cache before the env is blamed.
                    emit(f"the engine failed the build outside the Dockerfile's commands ({failed.message}); trying once more without the cache")
                    continue
                raise ImageBuildError(f"building {tag} failed: {failed.message}", "\n".join(log)) from None
            except ImageBuildError:
                raise
            except Exception as exc:  # transport errors and docker.errors.*: the engine's trouble, or the build's
                trouble = _engine_trouble(client, epoch, "\n".join(log), lost=_is_transport_error(exc))
                if trouble is not None:
                    raise trouble from exc
                raise ImageBuildError(f"building {tag} failed: {exc}", "\n".join(log)) from exc
    finally:
        if context != env_dir:
            shutil.rmtree(context, ignore_errors=True)
    return BuildResult(tag=tag, image_id=image_id, seconds=time.monotonic() - start, log=log, sdk=used_sdk)


class _TimedOut(Exception):
    """The build passed its deadline and was stopped."""


class _StepFailed(Exception):
    """The engine reported the build failed; `exit_code` is set when a RUN step exited non-zero."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


def _classic_build(client: Any, context: Path, dockerfile: str, tag: str, args: dict[str, str], labels: dict[str, str], deadline: float,
                   limits: dict[str, Any] | None, network_mode: str | None, emit: Callable[[str], None], *, nocache: bool) -> str:
    """One build with the engine's classic builder (through the SDK); returns the image id.

    Raises:
        _StepFailed: the engine reported an error.
        _TimedOut: the build passed `deadline` (time.monotonic()); it was stopped.
    """
    chunks = client.api.build(
        path=str(context), dockerfile=dockerfile, tag=tag, buildargs=args, rm=True, forcerm=True, decode=True, labels=labels,
        timeout=max(1, int(deadline - time.monotonic())), container_limits=limits, network_mode=network_mode, nocache=nocache,
    )
    for chunk in chunks:
        if "error" in chunk:
            detail = chunk.get("errorDetail") or {}
            code = detail.get("code") if isinstance(detail, dict) else None
            raise _StepFailed(str(chunk.get("error", "")).strip(), code if isinstance(code, int) else None)
        for line in str(chunk.get("stream") or "").splitlines():
            if line.strip():
                emit(line.rstrip())
        if time.monotonic() > deadline:
            chunks.close()  # closing the stream makes the engine abandon the build
            raise _TimedOut()
    return str(client.images.get(tag).id)


def _docker_client() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise ImageBuildError("building images needs the docker SDK: pip install 'openenv-hub[docker]'", reason=ImageBuildError.SDK) from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise ImageBuildError(f"no Docker engine reachable ({exc}); start Docker, or check DOCKER_HOST", reason=ImageBuildError.NO_ENGINE) from exc
    return client


# -- the machine's part: the engine and the base images ---------------------------------------------------


def engine_epoch(client: Any) -> str | None:
    """When the engine last started (None when it cannot tell): the engine makes its default
    `bridge` network anew at every start, so a different value means it restarted in between."""
    try:
        return str(client.networks.get("bridge").attrs.get("Created") or "") or None
    except Exception:  # no such network (bridge disabled), or no engine: cannot tell
        return None


def _engine_trouble(client: Any, epoch: str | None, log: str, *, lost: bool = False) -> ImageBuildError | None:
    """The engine's part in a failed build: gone, restarted since `epoch`, or (`lost`) the
    connection to it broke; None when it answers as before (the build itself failed)."""
    try:
        client.ping()
    except Exception as exc:
        return ImageBuildError(f"the Docker engine stopped answering during the build ({exc}); the build will be tried again once it is back",
                               log, reason=ImageBuildError.ENGINE_LOST)
    now = engine_epoch(client)
    if epoch is not None and now is not None and now != epoch:
        return ImageBuildError("the Docker engine restarted during the build; the build will be tried again", log, reason=ImageBuildError.ENGINE_LOST)
    if lost:
        return ImageBuildError("the connection to the Docker engine broke during the build; the build will be tried again", log,
                               reason=ImageBuildError.ENGINE_LOST)
    return None


# What a RUN step prints when it cannot reach the network (pip, apt, curl, npm, git): worth a probe.
_NETWORK_SIGNS = re.compile(r"temporary failure in name resolution|temporary failure resolving|could not resolve host|name or service not "
                            r"known|failed to establish a new connection|network is unreachable|getaddrinfo|eai_again|connection timed out", re.I)
# Names any build network that reaches the internet resolves.
PROBE_HOSTS = ("pypi.org", "deb.debian.org")
_PROBE = """import socket, sys
down = []
for host in sys.argv[1:]:
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            down.append(host)
print(" ".join(down))
"""


def _network_trouble(client: Any, dockerfile_text: str, args: dict[str, str], network_mode: str | None, log: str) -> ImageBuildError | None:
    """When a failed build's log shows network errors, ask a container on the build's network
    (from the build's base image) to resolve well-known names: if the resolver itself cannot be
    reached (EAI_AGAIN), the machine's network is down, not the env broken. An unknown name
    (a typo in the env's index URL) resolves to "no such host" and stays the env's failure."""
    if not _NETWORK_SIGNS.search(log):
        return None
    images = base_images(dockerfile_text, args)
    if not images:
        return None
    try:
        out = client.containers.run(images[0][0], ["python3", "-c", _PROBE, *PROBE_HOSTS], network_mode=network_mode or "bridge",
                                    remove=True, labels={f"{LABEL_PREFIX}.built-by": "openenv", f"{LABEL_PREFIX}.probe": "network"})
    except Exception:  # no python3 in the base image, say: cannot tell, so the build's verdict stands
        return None
    down = (out.decode() if isinstance(out, bytes) else str(out)).split()
    if not down:
        return None
    return ImageBuildError(f"the build could not reach the network: containers on the engine's build network cannot resolve "
                           f"{', '.join(down)} (the DNS resolver does not answer); the build will be tried again", log,
                           reason=ImageBuildError.NETWORK)


def _is_transport_error(exc: BaseException) -> bool:
    """An error of the connection to the engine (reset, closed mid-stream), not one the engine sent."""
    import requests

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError, ConnectionError)):
            return True
        if type(current).__module__.startswith("urllib3") and type(current).__name__ in ("ProtocolError", "ReadTimeoutError"):
            return True
        current = current.__cause__ or current.__context__
    return False


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _instructions(text: str) -> Iterator[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            word, _, rest = full.partition(" ")
            yield word.upper(), rest.strip()
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        yield word.upper(), rest.strip()


def base_images(dockerfile_text: str, build_args: dict[str, str] | None = None) -> list[tuple[str, bool]]:
    """The images a Dockerfile builds FROM (not `scratch`, not its own stages), in order, each with
    whether it comes from the `BASE_IMAGE` argument. Global `ARG`s and `build_args` are applied."""
    values: dict[str, str] = {}
    given = dict(build_args or {})
    stages: set[str] = set()
    found: list[tuple[str, bool]] = []
    seen_from = False
    for word, rest in _instructions(dockerfile_text):
        if word == "ARG" and not seen_from:
            for item in rest.split():
                name, eq, default = item.partition("=")
                values[name] = given.get(name, default.strip("\"'") if eq else values.get(name, ""))
        elif word == "FROM":
            seen_from = True
            parts = [p for p in rest.split() if not p.startswith("--")]
            if not parts:
                continue
            ref = parts[0]
            from_base = any(m.group(1) == "BASE_IMAGE" or m.group(3) == "BASE_IMAGE" for m in _VAR.finditer(ref))
            image = _VAR.sub(lambda m: values.get(m.group(1) or m.group(3)) or (m.group(2) or ""), ref)
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if image and image.lower() != "scratch" and image.lower() not in stages and (image, from_base) not in found:
                found.append((image, from_base))
    return found


def _ensure_base_images(client: Any, dockerfile_text: str, args: dict[str, str], *, explicit_base: bool,
                        on_log: Callable[[str], None] | None) -> None:
    """Make sure every base image is in the engine before the build: pull what is missing. When
    the `BASE_IMAGE` default cannot be pulled (no registry here) and nobody chose a base image,
    build on LOCAL_BASE_IMAGE if the engine has it (and say so); otherwise fail with what to do.

    Raises:
        ImageBuildError: a base image is missing and cannot be pulled (reason BASE_IMAGE).
    """
    for image, from_base in base_images(dockerfile_text, args):
        if _has_image(client, image):
            continue
        error = _pull(client, image)
        if error is None:
            if on_log is not None:
                on_log(f"pulled base image {image}")
            continue
        if from_base and not explicit_base and _has_image(client, LOCAL_BASE_IMAGE):
            args["BASE_IMAGE"] = LOCAL_BASE_IMAGE
            if on_log is not None:
                on_log(f"base image {image} cannot be pulled ({error}); building on {LOCAL_BASE_IMAGE}, made from Debian packages")
            continue
        hint = ("pass another base image (`openenv build --base-image IMAGE`, OPENENV_BASE_IMAGE, or the Hub's OPENENV_HUB_BASE_IMAGE: "
                "any image with Python >= 3.11 and pip), or make the registry-free one with `bash scripts/base-image` in an "
                f"openenv-hub checkout ({LOCAL_BASE_IMAGE})") if from_base else (
                f"this Dockerfile names {image} itself; pull or load it into the engine (docker pull / docker load), or make the "
                "Dockerfile take `ARG BASE_IMAGE` so another base can be passed")
        raise ImageBuildError(f"base image {image} is not in the Docker engine and cannot be pulled ({error}); {hint}",
                              reason=ImageBuildError.BASE_IMAGE)


def _has_image(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:  # docker.errors.ImageNotFound, or an invalid name: not usable as is
        return False
    return True


def _pull(client: Any, image: str) -> str | None:
    """Pull `image`; None on success, else the engine's reason in one line."""
    repo, tag = image, None
    if "@" not in image:
        last = image.rsplit("/", 1)[-1]
        if ":" in last:
            repo, tag = image.rsplit(":", 1)
    try:
        client.images.pull(repo, tag=tag or "latest") if "@" not in image else client.images.pull(image)
    except Exception as exc:  # registry unreachable, no such image, not authorised: all mean "cannot pull"
        text = str(getattr(exc, "explanation", None) or exc)
        return " ".join(text.split())[:300]
    return None
