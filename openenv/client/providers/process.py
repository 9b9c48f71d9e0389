"""`ProcessProvider`: an env folder's server as a local process, in the env's own venv.

    async with ProcessProvider("envs/echo_env") as p:      # venv made once, then cached
        async with EchoEnv(p.base_url) as env: ...

Our envs run on `python -m openenv.server` (the fast transport settings); envs that depend on
upstream openenv-core run on plain uvicorn in their venv, exactly as their Dockerfile would.
The server gets its own session (process group), so Ctrl-C in a notebook reaches the client
first and the client stops the server cleanly; a record in the state directory lets
`lifecycle.gc()` find it if the client crashes.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from openenv.client import _settings
from openenv.client.providers import lifecycle
from openenv.client.providers._venv import EnvFolder, ensure_venv, read_env_folder
from openenv.client.providers.base import Provider
from openenv.client.providers.lifecycle import kill_process_tree
from openenv.errors import ConfigurationError

__all__ = ["ProcessProvider", "free_port", "kill_process_tree"]

_ports_lock = threading.Lock()
_recent_ports: deque[int] = deque(maxlen=4096)


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str) -> int:
    """A port nobody listens on, below the kernel's ephemeral range, never handed out recently here.

    Below the ephemeral range because that is where the Docker engine picks the host ports it
    publishes: a server of ours on such a port makes the engine's next `docker run -p` on the
    machine fail. And never a recent one: a pool starting 32 servers at once must not give two
    of them the same port between the check here and the server's own bind.
    """
    low, _ = _ephemeral_range()
    top = low if low > 12000 else 65535
    with _ports_lock:
        for _ in range(200):
            port = random.randrange(10000, top)
            if port in _recent_ports:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue  # taken
            _recent_ports.append(port)
            return port
    raise OSError("no free port found between 10000 and the ephemeral range")


class ProcessProvider(Provider):
    """Run an env folder's server as a local process on 127.0.0.1.

    Args:
        env_dir: the env's folder (openenv.yaml, server/app.py, requirements).
        venv: True: the env's own cached venv (made with uv or venv); False: this interpreter
            (the env's dependencies must already be importable here); or a path to a python.
        sdk: our runtime in the venv: "auto" (this source checkout when running from one, else
            the published package), "local", "published", or a pip specifier.
        installer: "auto", "uv" or "venv".
        python: interpreter the venv is based on (default: this one).
        app: the ASGI app's import string (default: the manifest's `app`).
        host: interface to bind (loopback by default).
        port: port to bind (default: a free one).
        env: extra environment variables for the server.
        **kwargs: `Provider` options (startup_timeout_s, stop_timeout_s, labels, name).
    """

    kind = "process"

    def __init__(
        self,
        env_dir: str | Path,
        *,
        venv: bool | str | Path = True,
        sdk: str = "auto",
        installer: str = "auto",
        python: str | None = None,
        app: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.folder: EnvFolder = read_env_folder(env_dir)
        super().__init__(**{"name": self.folder.name, **kwargs})
        if not isinstance(venv, bool) and not Path(venv).is_file():
            raise ConfigurationError(f"venv={venv!r}: pass True, False, or the path of a python executable")
        self.venv = venv
        self.sdk = sdk
        self.installer = installer
        self.python = python
        self.app = app or self.folder.app
        self.host = host
        self.port = port
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.record_id = f"{_settings.name_prefix()}-{self.folder.name}-{uuid.uuid4().hex[:8]}"
        self.log_path: Path | None = None
        self._identity: str | None = None

    def interpreter(self) -> str:
        """The python that runs the server (making the env's venv when needed)."""
        if self.venv is True:
            return str(ensure_venv(self.folder, python=self.python, sdk=self.sdk, installer=self.installer))
        if self.venv is False:
            return self.python or sys.executable
        return str(self.venv)

    def command(self, python: str, port: int) -> list[str]:
        """The server's command line."""
        module = "uvicorn" if self.folder.upstream else "openenv.server"
        return [python, "-m", module, self.app, "--host", self.host, "--port", str(port)]

    def _launch(self) -> list[str]:
        python = self.interpreter()
        port = self.port or free_port(self.host)
        self.log_path = lifecycle.records_dir() / f"{self.record_id}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **self.env}
        if self.venv is True:
            env.pop("PYTHONPATH", None)  # the venv is the server's whole world, not this interpreter's paths
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                self.command(python, port),
                cwd=self.folder.path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._identity = lifecycle.process_identity(self.proc.pid)
        url = f"http://{self.host}:{port}"
        lifecycle.write_record(
            {
                "id": self.record_id,
                "kind": "process",
                "pid": self.proc.pid,
                "process": self._identity,
                "owner": lifecycle.this_owner(),
                "url": url,
                "started_at": time.time(),
                "env_dir": str(self.folder.path),
                "log": str(self.log_path),
                "labels": lifecycle.owner_labels(self.folder.name, self.labels),
            }
        )
        return [url]

    def _terminate(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                kill_process_tree(proc.pid, expected_identity=self._identity, timeout_s=self.stop_timeout_s)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        lifecycle.remove_record(self.record_id)  # and its log

    def exit_reason(self) -> str | None:
        proc = self.proc
        if proc is None:
            return "not started"
        code = proc.poll()
        if code is None:
            return None
        return (
            f"the server process exited with code {code}"
            if code >= 0
            else f"the server process was killed by signal {-code}"
        )

    def logs(self, tail: int = 200) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        with open(self.log_path, "rb") as f:
            lines = deque(f, maxlen=tail)
        return b"".join(lines).decode(errors="replace")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "pid": self.proc.pid if self.proc else None, "env_dir": str(self.folder.path)}
