"""Real servers on 127.0.0.1 for tests: an ASGI app in a thread, or a command in a subprocess."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from openenv.server.run import uvicorn_options

ROOT = Path(__file__).resolve().parents[2]


class ThreadServer:
    """uvicorn serving `app` on 127.0.0.1:<free port> in a daemon thread."""

    def __init__(self, app: Any, **options: Any) -> None:
        opts = {**uvicorn_options(), **options}
        self.config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **opts)
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="test-uvicorn")
        self.url = ""

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@contextlib.contextmanager
def serve_app(app: Any, **options: Any) -> Iterator[str]:
    """Serve an ASGI app for the duration of the block; yields its base URL."""
    server = ThreadServer(app, **options)
    try:
        yield server.start()
    finally:
        server.stop()


@contextlib.contextmanager
def payment_required_host() -> Iterator[str]:
    """A Space's host whose namespace must pay: every request is answered 402 Payment Required.
    Yields its base URL."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def refuse(request: Request) -> JSONResponse:
        return JSONResponse({"error": "Payment required to run this Space"}, status_code=402)

    with serve_app(Starlette(routes=[Route("/{path:path}", refuse)])) as url:
        yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    """Poll `url` until it answers 200 (fails fast if `proc` exits)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s: {last}")


class ProcessServer:
    """A server command run as a subprocess with `--host 127.0.0.1 --port N` appended."""

    def __init__(
        self, cmd: list[str], cwd: Path | str, env: dict[str, str] | None = None, port_args: bool = True
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [*cmd, "--host", "127.0.0.1", "--port", str(self.port)] if port_args else cmd
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"openenv-test-server-{self.port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env={**os.environ, **(env or {})}, stdout=self._log, stderr=subprocess.STDOUT
        )

    def wait(self, path: str = "/health", timeout: float = 60.0) -> str:
        wait_http(self.url + path, timeout, self.proc)
        return self.url

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@contextlib.contextmanager
def serve_process(cmd: list[str], cwd: Path | str, env: dict[str, str] | None = None) -> Iterator[ProcessServer]:
    server = ProcessServer(cmd, cwd, env)
    try:
        server.wait()
        yield server
    finally:
        server.stop()
