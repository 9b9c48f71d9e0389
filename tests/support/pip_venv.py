"""Fresh virtual environments that real pip installs into from a local wheelhouse, with no index.

`scripts/wheelhouse` fills `.cache/wheelhouse` with the wheels an env client needs (its
dependencies, hatchling to build env packages, the Hub client); this checkout's SDK comes as a
wheel of the local source (`openenv.images.local_sdk_wheel`). pip reads no config file of the
machine and no index, so what installs is exactly what the packages declare.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

from openenv.images import local_sdk_wheel
from tests.support.servers import ROOT

__all__ = ["Venv", "pip_environ", "wheelhouse"]


def wheelhouse() -> Path:
    """The folder of wheels (filled by scripts/wheelhouse, once).

    Raises:
        RuntimeError: the script failed (it needs the network the first time).
    """
    out = subprocess.run(["bash", str(ROOT / "scripts" / "wheelhouse")], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/wheelhouse failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def pip_environ(*find_links: Path) -> dict[str, str]:
    """Variables that make pip (and the build environments it makes) install only from `find_links`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(
        {
            "PIP_CONFIG_FILE": os.devnull,  # not the machine's pip.conf (its mirrors, constraints)
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": " ".join(str(p) for p in find_links),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }
    )
    return env


class Venv:
    """A fresh venv made with the stdlib `venv` (so it has pip, as a user's would).

    Args:
        path: where to make it.
        find_links: folders of wheels pip may install from (default: the wheelhouse and the SDK wheel).
    """

    def __init__(self, path: Path, find_links: list[Path] | None = None) -> None:
        self.path = path
        links = find_links if find_links is not None else [wheelhouse(), local_sdk_wheel().parent]
        self.env = pip_environ(*links)
        venv.EnvBuilder(with_pip=True, symlinks=True).create(path)
        self.python = str(path / "bin" / "python")

    def pip(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run `python -m pip ARGS`; raises AssertionError with pip's output when it fails."""
        out = subprocess.run(
            [self.python, "-m", "pip", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=self.path,
        )
        assert out.returncode == 0, f"pip {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out

    def installed(self) -> dict[str, str]:
        """Installed distributions (normalized names) and their versions."""
        listed = json.loads(self.pip("list", "--format=json").stdout)
        return {d["name"].lower().replace("_", "-"): d["version"] for d in listed}

    def run(
        self, code: str, *args: str, cwd: Path | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run `code` (with `args` as sys.argv[1:]) with the venv's python, outside this checkout, so
        only what is installed imports."""
        return subprocess.run(
            [self.python, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=cwd or self.path,
        )
