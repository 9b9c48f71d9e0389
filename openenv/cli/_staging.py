"""Writing a new folder all at once: built beside its destination, moved into place at the end, so a
failure (or Ctrl-C) leaves nothing half-written. `openenv init` and `openenv import` write this way."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from openenv.cli._output import CliError

__all__ = ["check_free", "staged_folder"]


def check_free(dest: Path) -> None:
    """Refuse a destination that holds something (say it before slow work, not after).

    Raises:
        CliError: `dest` exists and is not an empty folder (exit 2).
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CliError(f"{dest} already exists", "pick another name, or remove the folder first", exit_code=2)


@contextlib.contextmanager
def staged_folder(dest: Path) -> Iterator[Path]:
    """A fresh folder beside `dest` to write into; it becomes `dest` when the block ends without an
    error, and is removed when it raises.

    Raises:
        CliError: `dest` exists and is not an empty folder (exit 2), or its parent cannot be written.
    """
    check_free(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the env folder is an ordinary one
    except OSError as exc:
        raise CliError(f"cannot create {dest}: {exc.strerror}", "check the folder's permissions") from None
    try:
        yield staging
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
