"""Finding the environment a command works on: its folder and manifest."""

from __future__ import annotations

from pathlib import Path

from openenv.cli._output import CliError
from openenv.manifest import MANIFEST_FILE, Manifest, ManifestError, UnsupportedManifestError, load_manifest

__all__ = ["env_folder"]


def env_folder(path: str | None) -> tuple[Path, Manifest]:
    """The env folder at `path` (default ".") and its manifest.

    Raises:
        CliError: not a folder, no manifest (exit 2), or an invalid one (exit 1).
    """
    root = Path(path or ".").expanduser()
    if not root.is_dir():
        raise CliError(f"{root} is not a folder", "pass an environment's folder, e.g. envs/echo_env", exit_code=2)
    if not (root / MANIFEST_FILE).is_file():
        raise CliError(
            f"no {MANIFEST_FILE} in {root.resolve()}: not an environment folder",
            "pass the env's folder, or create one with `openenv init NAME`",
            exit_code=2,
        )
    try:
        return root, load_manifest(root)
    except UnsupportedManifestError as exc:
        raise CliError(str(exc), exit_code=2) from None
    except ManifestError as exc:
        raise CliError(str(exc), f"run `openenv validate {path or '.'}` for every problem") from None
