"""Building environment images with the Docker engine (through the `docker` SDK).

An env's Dockerfile installs the runtime with `pip install "${OPENENV_SDK}"`, which defaults to the
published package. When this SDK runs from a source checkout (this repository), `build_image`
builds a wheel of the local source, stages it in a copy of the build context and points
`OPENENV_SDK` at it, so images of in-repo envs carry the SDK being developed, not a release.
"""

from __future__ import annotations

import hashlib
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

__all__ = ["BuildResult", "ImageBuildError", "build_image", "local_sdk_wheel", "source_checkout"]

LABEL_PREFIX = "org.openenv"
_SDK_DIR = ".openenv-sdk"
_IGNORED = (".git", ".venv", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", "*.egg-info", _SDK_DIR)


class ImageBuildError(OpenEnvError):
    """The image could not be built; `log` holds the build output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


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
        raise ImageBuildError("the local SDK is not a source checkout; build with sdk='published'")
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
        raise ImageBuildError(f"building the SDK wheel failed: {proc.stderr[-1500:]}")
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

    Raises:
        ImageBuildError: no Dockerfile, no Docker engine, or the build failed (with its log).
    """
    env_dir = Path(env_dir).resolve()
    dockerfile_rel = dockerfile or "Dockerfile"
    if not (env_dir / dockerfile_rel).is_file():
        raise ImageBuildError(f"no {dockerfile_rel} in {env_dir}; add one (see `openenv init`) or pass the env's folder")
    args = dict(build_args or {})
    if base_image:
        args.setdefault("BASE_IMAGE", base_image)
    context = env_dir
    used_sdk = "published"
    if sdk not in ("auto", "local", "published"):
        raise ImageBuildError(f"sdk must be 'auto', 'local' or 'published', not {sdk!r}")
    if sdk == "local" or (sdk == "auto" and source_checkout() is not None and _dockerfile_takes_sdk(env_dir, dockerfile_rel)):
        wheel = local_sdk_wheel()
        context = _stage_context(env_dir, wheel)
        args.setdefault("OPENENV_SDK", f"/app/env/{_SDK_DIR}/{wheel.name}[server]")
        used_sdk = f"local:{wheel.name}"
    client = client or _docker_client()
    all_labels = {f"{LABEL_PREFIX}.built-by": "openenv", f"{LABEL_PREFIX}.env-dir": env_dir.name, **(labels or {})}
    log: list[str] = []
    start = time.monotonic()
    image_id = ""
    try:
        chunks = client.api.build(
            path=str(context), dockerfile=dockerfile_rel, tag=tag, buildargs=args, rm=True, forcerm=True, decode=True,
            labels=all_labels, timeout=int(timeout_s), container_limits=container_limits,
        )
        for line in _stream(chunks):
            if line.startswith("\x00error:"):
                raise ImageBuildError(f"building {tag} failed: {line[7:].strip()}", "\n".join(log))
            log.append(line)
            if on_log is not None:
                on_log(line)
            if time.monotonic() - start > timeout_s:
                chunks.close()  # closing the stream makes the engine abandon the build
                raise ImageBuildError(f"building {tag} took longer than {timeout_s:g}s; the build was stopped", "\n".join(log))
        image_id = client.images.get(tag).id
    except ImageBuildError:
        raise
    except Exception as exc:  # docker.errors.* and transport errors: report with the log so far
        raise ImageBuildError(f"building {tag} failed: {exc}", "\n".join(log)) from exc
    finally:
        if context != env_dir:
            shutil.rmtree(context, ignore_errors=True)
    return BuildResult(tag=tag, image_id=image_id, seconds=time.monotonic() - start, log=log, sdk=used_sdk)


def _stream(chunks: Iterator[dict[str, Any]]) -> Iterator[str]:
    for chunk in chunks:
        if "error" in chunk:
            yield "\x00error:" + str(chunk.get("error", "")).strip()
            return
        text = chunk.get("stream")
        if text:
            for line in str(text).splitlines():
                if line.strip():
                    yield line.rstrip()


def _docker_client() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise ImageBuildError("building images needs the docker SDK: pip install 'openenv-hub[docker]'") from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise ImageBuildError(f"no Docker engine reachable ({exc}); start Docker, or check DOCKER_HOST") from exc
    return client
