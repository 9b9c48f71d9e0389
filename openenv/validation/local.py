"""Validate a folder end to end: static checks, then (optionally) serve it locally and run the
runtime checks against it, and/or check a server that is already running."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from openenv.errors import OpenEnvError
from openenv.validation.registry import REGISTRY, define, ok, problem, to_result
from openenv.validation.report import CheckResult, Report
from openenv.validation.runtime import validate_url
from openenv.validation.static import validate_folder

__all__ = ["LocalServerError", "failed_to_start", "serve_folder", "serve_locally", "started_result", "validate"]

STARTS = define(
    "runtime.starts",
    "The env's server starts locally (validate --run)",
    severity="error",
    stage="runtime",
    remediation="run `openenv serve PATH` to see the server's error",
)


class LocalServerError(OpenEnvError):
    """The env's server did not start; `log` holds its output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_locally(
    root: str | Path, app: str, *, python: str | None = None, timeout_s: float = 60.0, package: str | None = None
) -> Iterator[str]:
    """Run `python -m uvicorn APP` in the env folder on a free 127.0.0.1 port; yields its URL.

    Args:
        package: serve the folder as this package (APP is then `<package>.server.app:app`), the way
            upstream's envs with relative imports run; the folder is linked under that name, not copied.

    Raises:
        LocalServerError: the server exited or did not answer /health within `timeout_s`.
    """
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    links = tempfile.TemporaryDirectory(prefix="openenv-serve-")
    try:
        app_dir = "."
        if package:
            (Path(links.name) / package).symlink_to(Path(root).resolve(), target_is_directory=True)
            app_dir = links.name  # `python -m` keeps the folder itself on sys.path too
        # plain uvicorn: it is there for our SDK and for upstream's, so envs built on either can be run
        cmd = [
            python or sys.executable,
            "-m",
            "uvicorn",
            app,
            "--app-dir",
            app_dir,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        proc = subprocess.Popen(
            cmd, cwd=str(root), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ)
        )
    except OSError:
        log.close()
        links.cleanup()
        raise
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise LocalServerError(f"the server exited with code {proc.returncode} before answering", _tail(log))
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # it answers (maybe 503 while warming): the runtime checks judge the rest
            except OSError:
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"the server did not answer on {url} within {timeout_s:g}s", _tail(log)
                    ) from None
                time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        log.close()
        links.cleanup()


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode("utf-8", "replace")[-3000:]


def validate(
    path: str | Path | None = None,
    *,
    url: str | None = None,
    run: bool = False,
    space_id: str | None = None,
    import_app: bool = True,
    python: str | None = None,
    strict: bool = False,
    token: str | None = None,
    startup_timeout_s: float = 60.0,
    request_timeout_s: float = 30.0,
    latency_steps: int = 20,
    timeout_s: float | None = None,
) -> Report:
    """Validate a folder, a running server, or both (one merged report).

    Args:
        path: env folder for the static checks.
        url: a running server for the runtime checks.
        run: also serve `path` locally (no Docker) and run the runtime checks against it.
        startup_timeout_s: seconds for the app's import and the local server's start-up.
        request_timeout_s: seconds for each request of the runtime checks.
        timeout_s: deprecated (one release): both of the above at once.
        Others: as for `validate_folder` and `validate_url`.

    Returns:
        The report. Raises only for bad arguments (neither path nor url: ValueError).
    """
    if path is None and url is None:
        raise ValueError("give a folder, a url, or both")
    if timeout_s is not None:
        import warnings

        warnings.warn(
            "validate(timeout_s=) is deprecated: pass startup_timeout_s= and request_timeout_s=",
            DeprecationWarning,
            stacklevel=2,
        )
        startup_timeout_s = request_timeout_s = timeout_s
    report: Report | None = None
    if path is not None:
        report = validate_folder(
            path, space_id=space_id, import_app=import_app, python=python, strict=strict, timeout_s=startup_timeout_s
        )
        if run and report.status in ("pass", "warn", "fail") and report.manifest is not None:
            timeouts = (startup_timeout_s, request_timeout_s)
            report = report.merge(_run_locally(Path(path), report, python, strict, timeouts, latency_steps))
    if url is not None:
        remote = validate_url(url, token=token, timeout_s=request_timeout_s, latency_steps=latency_steps, strict=strict)
        report = remote if report is None else report.merge(remote)
    assert report is not None
    return report


@contextlib.contextmanager
def serve_folder(root: Path, folder_report: Report, *, python: str | None, timeout_s: float) -> Iterator[str]:
    """Serve a validated folder locally the way its app imported (see `serve_locally`); yields its URL.

    Raises:
        LocalServerError: the app module was not found, or the server did not start.
    """
    from openenv.manifest import Manifest, find_app_module

    manifest = Manifest.model_validate(folder_report.manifest)
    app_result = folder_report.results("app.module")
    if app_result and app_result[0].status == "fail":
        raise LocalServerError("the app module was not found (see app.module)")
    module = find_app_module(root, manifest.app_module) or manifest.app_module
    package = None
    imported = folder_report.results("app.import")
    if imported and imported[0].details.get("import_mode") == "package":  # serve it the way it imported
        module = str(imported[0].details["module"])
        package = module.split(".")[0]
    with serve_locally(
        root, f"{module}:{manifest.app_attr}", python=python, timeout_s=timeout_s, package=package
    ) as url:
        yield url


def started_result(started: float, url: str) -> CheckResult:
    """runtime.starts' result for a server that answers at `url`."""
    return to_result(REGISTRY[STARTS], ok(f"serving on {url}"), round((time.perf_counter() - started) * 1000, 1))


def failed_to_start(exc: LocalServerError, strict: bool) -> Report:
    """The runtime report of a folder whose server did not start."""
    return Report(strict=strict, checks=[to_result(REGISTRY[STARTS], problem(str(exc), log=exc.log))]).finish()


def _run_locally(
    root: Path, folder_report: Report, python: str | None, strict: bool, timeouts: tuple[float, float], steps: int
) -> Report:
    started = time.perf_counter()
    startup_s, request_s = timeouts
    try:
        with serve_folder(root, folder_report, python=python, timeout_s=startup_s) as url:
            ok_result = started_result(started, url)
            remote = validate_url(url, timeout_s=request_s, latency_steps=steps, strict=strict)
    except LocalServerError as exc:
        return failed_to_start(exc, strict)
    remote.checks.insert(0, ok_result)
    remote.target.url = None  # a throwaway local URL is not the target
    return remote.finish()
