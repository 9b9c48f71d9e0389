"""A private PostgreSQL server for tests that stop and start the database (fault tests).

Uses the binaries `scripts/postgres` installs; runs as the `postgres` user on a free
127.0.0.1 port with its data in a temporary folder.
"""

from __future__ import annotations

import contextlib
import glob
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.servers import free_port

__all__ = ["PrivatePostgres"]


class PrivatePostgres:
    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            raise RuntimeError("PostgreSQL binaries not found; run `bash scripts/postgres` (scripts/test does)")
        self.bin = Path(found[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="openenv-pg-"))
        shutil.chown(self.dir, "postgres")
        self.data = self.dir / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._su(f"{self.bin}/initdb -D {self.data} -U postgres --auth=trust -E UTF8 >/dev/null")

    def _su(self, command: str) -> None:
        subprocess.run(
            ["su", "postgres", "-c", command], check=True, timeout=120, cwd="/"
        )  # the user may not enter ours

    def start(self) -> None:
        self._su(
            f"{self.bin}/pg_ctl -D {self.data} -l {self.dir}/log -o '-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1' -w start >/dev/null"
        )

    def stop(self) -> None:
        self._su(f"{self.bin}/pg_ctl -D {self.data} -m fast -w stop >/dev/null")

    def restart(self, down_s: float = 2.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
