"""The SDK an image gets: a wheel of this source checkout, staged into a copy of the build context."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from openenv.images._errors import ImageBuildError

__all__ = ["SDK_DIR", "dockerfile_takes_sdk", "local_sdk_wheel", "source_checkout", "stage_context"]

SDK_DIR = ".openenv-sdk"
_IGNORED = (
    ".git",
    ".venv",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    SDK_DIR,
)


def source_checkout() -> Path | None:
    """The repository root when `openenv` is imported from a source checkout, else None."""
    root = Path(__file__).resolve().parents[2]
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
        raise ImageBuildError(
            "the local SDK is not a source checkout; build with sdk='published'", reason=ImageBuildError.SDK
        )
    out = (cache_dir or root / ".cache" / "sdk-wheels") / _source_digest(root)
    wheels = sorted(out.glob("openenv_hub-*.whl"))
    if wheels:
        return wheels[-1]
    out.mkdir(parents=True, exist_ok=True)
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    cmd = (
        [uv, "build", "--wheel", "--out-dir", str(out), str(root)]
        if Path(uv).exists()
        else [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(root)]
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wheels = sorted(out.glob("openenv_hub-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ImageBuildError(f"building the SDK wheel failed: {proc.stderr[-1500:]}", reason=ImageBuildError.SDK)
    return wheels[-1]


def stage_context(env_dir: Path, wheel: Path) -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="openenv-build-"))
    # symlinks=True: a link is copied as a link, never as the file it points at (which could be
    # anything on this machine); the build context then holds nothing from outside the folder.
    shutil.copytree(env_dir, ctx, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_IGNORED))
    (ctx / SDK_DIR).mkdir()
    shutil.copy2(wheel, ctx / SDK_DIR / wheel.name)
    return ctx


def dockerfile_takes_sdk(env_dir: Path, dockerfile_rel: str = "Dockerfile") -> bool:
    dockerfile = env_dir / dockerfile_rel
    return dockerfile.is_file() and "OPENENV_SDK" in dockerfile.read_text(encoding="utf-8", errors="replace")
