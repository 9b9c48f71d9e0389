"""Each env folder gets its own virtual environment, made once per set of dependencies.

The venv's name is a hash of what goes into it (the interpreter, the env's requirements, the SDK
it needs), so a second start of the same env reuses it in milliseconds and an env whose
requirements change gets a fresh one. Made with uv when it is installed (seconds, shared wheel
cache), else with `python -m venv` + pip. Concurrent starts (a pool) wait on a file lock for the
one that builds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from openenv.client import _settings
from openenv.errors import ConfigurationError, ProviderStartError, ProviderUnavailableError

__all__ = ["EnvFolder", "ensure_venv", "read_env_folder"]

log = logging.getLogger("openenv.providers")

_READY = ".openenv-ready"
_UPSTREAM = {"openenv-core", "openenv"}
_OURS = "openenv-hub"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class EnvFolder:
    """What running an env folder needs.

    Attributes:
        path: the folder (a Space's files).
        name: its manifest name (or the folder's name).
        app: the ASGI app's import string, relative to the folder ("server.app:app").
        port: the port its manifest declares (containers listen there).
        requirements: dependency specifiers from pyproject.toml [project].dependencies.
        requirements_file: server/requirements.txt (or requirements.txt) when present.
        upstream: it depends on upstream openenv-core (served with uvicorn, not our runtime).
    """

    path: Path
    name: str
    app: str
    port: int
    requirements: tuple[str, ...]
    requirements_file: Path | None
    upstream: bool


def _manifest(path: Path) -> dict[str, str]:
    """Top-level `key: value` pairs of openenv.yaml (all this module needs of it)."""
    file = path / "openenv.yaml"
    if not file.is_file():
        return {}
    values: dict[str, str] = {}
    for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
        if line[:1].isspace() or line.lstrip().startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        values[key.strip()] = value.split(" #", 1)[0].strip().strip("'\"")
    return values


def _dep_name(spec: str) -> str:
    m = _NAME.match(spec)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def read_env_folder(path: str | Path) -> EnvFolder:
    """Read an env folder's manifest and dependencies.

    Raises:
        ConfigurationError: the folder does not exist or has no server app to run.
    """
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigurationError(f"{folder} is not a folder; pass the env's folder (the one with openenv.yaml)")
    manifest = _manifest(folder)
    app = manifest.get("app") or "server.app:app"
    module = app.partition(":")[0].replace(".", "/")
    if not ((folder / f"{module}.py").is_file() or (folder / module / "__init__.py").is_file()):
        raise ConfigurationError(
            f"{folder} has no {module}.py for app {app!r}; is this an env folder (see `openenv init`)?"
        )
    try:
        port = int(manifest.get("port") or 8000)
    except ValueError:
        raise ConfigurationError(f"{folder}/openenv.yaml: port {manifest.get('port')!r} is not a number") from None
    deps: list[str] = []
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            deps = list(tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("dependencies", []))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{pyproject} is not valid TOML: {exc}") from None
    req_file = next(
        (p for p in (folder / "server" / "requirements.txt", folder / "requirements.txt") if p.is_file()), None
    )
    names = {_dep_name(d) for d in deps}
    if req_file is not None:
        names |= {_dep_name(line) for line in req_file.read_text(encoding="utf-8", errors="replace").splitlines()}
    return EnvFolder(
        path=folder,
        name=manifest.get("name") or folder.name,
        app=app,
        port=port,
        requirements=tuple(deps),
        requirements_file=req_file,
        upstream=bool(names & _UPSTREAM),
    )


def sdk_spec(folder: EnvFolder, sdk: str) -> str | None:
    """What to install for our runtime: None for upstream envs (they bring openenv-core).

    Raises:
        ConfigurationError: `sdk="local"` outside a source checkout.
    """
    if folder.upstream:
        return None
    from openenv.images import source_checkout

    root = source_checkout()
    if sdk == "auto":
        sdk = "local" if root is not None else "published"
    if sdk == "local":
        if root is None:
            raise ConfigurationError("sdk='local' needs the SDK to run from a source checkout; use sdk='published'")
        return f"-e {root}[server]"
    if sdk == "published":
        return f"{_OURS}[server]"
    return sdk


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else None


def ensure_venv(
    folder: EnvFolder,
    *,
    python: str | None = None,
    sdk: str = "auto",
    installer: str = "auto",
    cache_dir: Path | None = None,
) -> Path:
    """The env's venv (made now if missing); returns its python.

    Args:
        folder: from `read_env_folder`.
        python: interpreter to base the venv on (default: this one).
        sdk: "auto", "local", "published" or a pip specifier for our runtime.
        installer: "auto" (uv when found), "uv" or "venv".
        cache_dir: where venvs live (default `<OPENENV_CACHE_DIR>/venvs`).

    Raises:
        ProviderUnavailableError: uv was asked for and is missing.
        ProviderStartError: making the venv or installing failed (the installer's output is in
            the message).
    """
    python = python or sys.executable
    uv = _uv() if installer in ("auto", "uv") else None
    if installer == "uv" and uv is None:
        raise ProviderUnavailableError(
            "installer='uv' but uv is not installed: pip install uv, or use installer='venv'"
        )
    if installer not in ("auto", "uv", "venv"):
        raise ConfigurationError(f"installer must be 'auto', 'uv' or 'venv', not {installer!r}")
    spec = sdk_spec(folder, sdk)
    req_text = (
        folder.requirements_file.read_text(encoding="utf-8", errors="replace") if folder.requirements_file else ""
    )
    key_data = {
        "python": str(Path(python).resolve()),
        "version": list(sys.version_info[:3]) if python == sys.executable else None,
        "deps": sorted(folder.requirements),
        "requirements.txt": req_text,
        "sdk": spec,
        "tool": "uv" if uv else "venv",
    }
    key = hashlib.sha256(json.dumps(key_data, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_dir or _settings.cache_dir() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"{re.sub(r'[^A-Za-z0-9_.-]', '-', folder.name)}-{key}"
    venv_python = venv / "bin" / "python"
    if (venv / _READY).is_file():
        return venv_python
    with open(root / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another start (a pool member) may be building it
        if (venv / _READY).is_file():
            return venv_python
        shutil.rmtree(venv, ignore_errors=True)  # a half-made venv from an interrupted build
        packages = [*folder.requirements]
        if folder.requirements_file is not None:
            packages += ["-r", str(folder.requirements_file)]
        if spec:
            packages += spec.split(" ", 1) if spec.startswith("-e ") else [spec]
        log.info("making the venv of %s at %s (once per set of dependencies)", folder.name, venv)
        if uv:
            _run([uv, "venv", "-q", "--python", python, str(venv)], folder)
            if packages:
                _run([uv, "pip", "install", "-q", "--python", str(venv_python), *packages], folder)
        else:
            _run([python, "-m", "venv", str(venv)], folder)
            if packages:
                _run([str(venv_python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages], folder)
        (venv / _READY).write_text(json.dumps(key_data, indent=1))
    return venv_python


def _run(cmd: list[str], folder: EnvFolder) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProviderStartError(f"making the venv of {folder.name} failed: {exc}") from exc
    if proc.returncode != 0:
        raise ProviderStartError(
            f"making the venv of {folder.name} failed ({' '.join(cmd[:3])} ... exited {proc.returncode}); "
            f"check its requirements:\n{(proc.stderr or proc.stdout)[-2000:]}",
            logs=proc.stderr,
        )
