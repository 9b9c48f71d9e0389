"""The two ways an image gets built: BuildKit (through a docker CLI that has it) or the engine's
classic builder (through the SDK). Each runs one build and reports a failure as `StepFailed`,
with the exit code when a step of the Dockerfile exited non-zero (the env's doing)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv.images._signs import step_exit_codes

__all__ = ["BuildSpec", "Overgrown", "StepFailed", "TimedOut", "buildkit_build", "buildkit_command", "classic_build"]


class TimedOut(Exception):
    """The build passed its deadline and was stopped."""


class Overgrown(Exception):
    """The build's `guard` said it grew past its cap; it was stopped."""


class StepFailed(Exception):
    """The engine reported the build failed; `exit_code` is set when a RUN step exited non-zero
    (whether the engine is to blame is asked of the engine itself, never read from this)."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


class BuildSpec:
    """What one build is: the context, the Dockerfile in it, the tag, arguments, labels and limits."""

    def __init__(
        self,
        context: Path,
        dockerfile: str,
        tag: str,
        args: dict[str, str],
        labels: dict[str, str],
        deadline: float,
        *,
        memory: int | None = None,
        network_mode: str | None = None,
        nocache: bool = False,
        guard: Callable[[], str | None] | None = None,
        cgroup_parent: str | None = None,
        engine_env: dict[str, str] | None = None,
    ) -> None:
        self.context, self.dockerfile, self.tag, self.args, self.labels = context, dockerfile, tag, args, labels
        self.deadline, self.memory, self.network_mode, self.nocache = deadline, memory, network_mode, nocache
        self.guard = guard  # polled while the build runs: a reason to stop it, or None
        self.cgroup_parent = cgroup_parent  # the classic builder's: the cgroup its RUN steps' containers go under
        # what the BuildKit CLI needs to reach the engine the build is for (its DOCKER_HOST), over the process's own
        self.engine_env = dict(engine_env or {})


_GUARD_EVERY_S = 0.5


# -- BuildKit ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def buildkit_command() -> tuple[str, ...] | None:
    """The command that builds with BuildKit on this machine, or None when there is none:
    `docker buildx build --load` where the buildx plugin is installed, else a docker CLI with
    BuildKit built in (20.10 to 22.x, e.g. Debian's docker.io) run with DOCKER_BUILDKIT=1.
    OPENENV_DOCKER_CLI names the CLI to use."""
    chosen = os.environ.get("OPENENV_DOCKER_CLI")
    candidates = [chosen] if chosen else []
    candidates += [
        c for c in (shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker") if c and c not in candidates
    ]
    usable = [c for c in candidates if os.access(c, os.X_OK)]
    for cli in usable:
        if _quiet([cli, "buildx", "version"]):
            return (cli, "buildx", "build", "--load")
    for cli in usable:
        out = subprocess.run(
            [cli, "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True, timeout=30
        )
        major = re.match(r"\s*(\d+)\.", out.stdout or "")
        if major and int(major.group(1)) < 23:  # 23 made `docker build` a buildx alias; older CLIs carry BuildKit
            return (cli, "build")
    return None


def _quiet(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def buildkit_build(command: tuple[str, ...], spec: BuildSpec, emit: Callable[[str], None]) -> None:
    """One BuildKit build through the CLI (`command`), its plain progress streamed to `emit`.

    Raises:
        StepFailed: the CLI exited non-zero (`exit_code` from a failed RUN step, when one failed).
        TimedOut: the build passed `spec.deadline`; it was interrupted (the engine cancels it).
    """
    cmd = [*command, "--progress=plain", "-f", str(spec.context / spec.dockerfile), "-t", spec.tag]
    for key, value in spec.args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    for key, value in spec.labels.items():
        cmd += ["--label", f"{key}={value}"]
    if spec.network_mode:
        cmd += ["--network", spec.network_mode]
    if spec.nocache:
        cmd.append("--no-cache")
    cmd.append(str(spec.context))
    env = {**os.environ, **spec.engine_env, "DOCKER_BUILDKIT": "1", "BUILDKIT_PROGRESS": "plain", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    tail: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            if line.strip():
                tail.append(line)
                del tail[:-60]
                emit(line)

    reader = threading.Thread(target=pump, name="buildkit-log", daemon=True)
    reader.start()
    while True:
        left = spec.deadline - time.monotonic()
        try:
            proc.wait(timeout=max(0.0, min(left, _GUARD_EVERY_S) if spec.guard else left))
            break
        except subprocess.TimeoutExpired:
            why = spec.guard() if spec.guard else None
            if why is None and time.monotonic() < spec.deadline:
                continue
            _interrupt(proc)
            reader.join(10)
            if why is not None:
                raise Overgrown(why) from None
            raise TimedOut() from None
    reader.join(10)
    if proc.returncode != 0:
        text = "\n".join(tail)
        found = step_exit_codes(text)
        errors = [line for line in tail if re.search(r"\berror\b", line, re.I)]  # shown, never classified
        raise StepFailed(
            (errors[-1] if errors else (tail[-1] if tail else f"exit status {proc.returncode}")).strip(),
            found[-1] if found else None,
        )


def _interrupt(proc: subprocess.Popen[str]) -> None:
    """Stop the CLI as Ctrl-C would (it cancels the build in the engine), then for good."""
    for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


# -- the classic builder ----------------------------------------------------------------------------------


def classic_build(client: Any, spec: BuildSpec, emit: Callable[[str], None]) -> None:
    """One build with the engine's classic builder (through the SDK).

    Raises:
        StepFailed: the engine reported an error.
        TimedOut: the build passed `spec.deadline`; it was stopped.
        Overgrown: `spec.guard` gave a reason to stop; it was stopped.
    """
    limits = {"memory": spec.memory, "memswap": spec.memory} if spec.memory else None
    responses: list[Any] = []  # the build's HTTP response: another thread can hang it up
    api = _own_api(client.api, {"cgroupparent": spec.cgroup_parent} if spec.cgroup_parent else {}, responses)
    chunks = api.build(
        path=str(spec.context),
        dockerfile=spec.dockerfile,
        tag=spec.tag,
        buildargs=spec.args,
        rm=True,
        forcerm=True,
        decode=True,
        labels=spec.labels,
        timeout=max(1, int(spec.deadline - time.monotonic())),
        container_limits=limits,
        network_mode=spec.network_mode,
        nocache=spec.nocache,
    )
    stopped: list[str] = []
    done = threading.Event()

    def watch() -> None:  # a step that prints nothing never returns to the loop below
        assert spec.guard is not None
        while not done.wait(_GUARD_EVERY_S):
            why = spec.guard()
            if why is not None:
                stopped.append(why)
                _hang_up(responses)  # the engine abandons a build whose client has gone
                return

    if spec.guard is not None:
        threading.Thread(target=watch, name="build-guard", daemon=True).start()
    try:
        _classic_stream(chunks, spec, emit)
    except Exception:
        if stopped:
            raise Overgrown(stopped[0]) from None
        raise
    finally:
        done.set()
    if stopped:
        raise Overgrown(stopped[0])


def _own_api(api: Any, query: dict[str, str], responses: list[Any]) -> Any:
    """`api` (the SDK's low-level client) for one build: it adds `query` to its requests (the
    engine's build endpoint takes `cgroupparent`, the SDK's `build()` has no argument for it) and
    keeps the streamed response in `responses` (a step that prints nothing blocks the reading
    thread, so only another thread can stop it, and the SDK's generator cannot be closed while
    it reads)."""
    own = object.__new__(type(api))
    own.__dict__.update(api.__dict__)  # the same connection pool and settings
    if query:
        own.params = {**(getattr(api, "params", None) or {}), **query}
    stream = api._stream_helper

    def keep(response: Any, decode: bool = False) -> Any:
        responses.append(response)
        return stream(response, decode=decode)

    own._stream_helper = keep
    return own


def _hang_up(responses: list[Any]) -> None:
    """End the build's stream from another thread: its socket is shut down, so the blocked read
    returns and the engine sees its client gone."""
    for response in responses:
        sock = getattr(getattr(response.raw, "_connection", None), "sock", None)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
            else:
                response.close()
        except OSError:  # already closed: the build has ended anyway
            continue


def _classic_stream(chunks: Any, spec: BuildSpec, emit: Callable[[str], None]) -> None:
    for chunk in chunks:
        if "error" in chunk:
            detail = chunk.get("errorDetail") or {}
            code = detail.get("code") if isinstance(detail, dict) else None
            raise StepFailed(str(chunk.get("error", "")).strip(), code if isinstance(code, int) else None)
        for line in str(chunk.get("stream") or "").splitlines():
            if line.strip():
                emit(line.rstrip())
        if time.monotonic() > spec.deadline:
            chunks.close()  # closing the stream makes the engine abandon the build
            raise TimedOut()
