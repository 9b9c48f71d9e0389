"""What the benchmarks share: servers on a port the OS picks, polled until healthy; subprocesses
whose exit codes are checked; and one way to fail (a message and exit 1, never a timed failure).

Run only with our venv's Python (the drivers that run under upstream's venv use `_eventloop` alone).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# First on the path, even when an editable install already lists it after site-packages: a library
# that ships a top-level `tests` package (cint does) must not stand in for ours.
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))

import _eventloop  # noqa: E402

from tests.support.servers import ProcessServer  # noqa: E402

# Upstream's import package is also named `openenv`: its processes must never see ours on PYTHONPATH
# (an empty value counts as unset).
UPSTREAM_ENV = {"PYTHONPATH": ""}
DEFAULT_UPSTREAM = ROOT / ".cache" / "upstream-venv" / "bin" / "python"


class BenchmarkError(RuntimeError):
    """A contestant failed; the benchmark stops with this message and saves nothing."""


def tail(text: str, chars: int = 3000) -> str:
    text = text.strip()
    return text if len(text) <= chars else "..." + text[-chars:]


def run_checked(cmd: Sequence[str], *, what: str, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` that raises BenchmarkError (with the command's output) unless it exits 0."""
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"{what}: `{shlex.join(cmd)}` ran past {timeout:g} s") from None
    except OSError as exc:
        raise BenchmarkError(f"{what}: `{shlex.join(cmd)}` could not start: {exc}") from None
    if out.returncode != 0:
        output = tail(out.stderr) or tail(out.stdout)
        raise BenchmarkError(f"{what} failed (exit {out.returncode}): `{shlex.join(cmd)}`\n{output}")
    return out


def json_line(out: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    """The JSON object on the last line of a command's stdout (how the drivers report)."""
    lines = out.stdout.strip().splitlines()
    try:
        return dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        raise BenchmarkError(f"{what} printed no JSON result line:\n{tail(out.stdout)}\n{tail(out.stderr)}") from None


@dataclass
class Server:
    url: str
    pid: int
    loop: str


@contextlib.contextmanager
def serve(
    cmd: Sequence[str],
    cwd: Path | str,
    env: dict[str, str] | None = None,
    *,
    health: str = "/health",
    timeout: float = 60.0,
) -> Iterator[Server]:
    """Run `cmd --host 127.0.0.1 --port P` (P: a free port the OS gave) for the block.

    Polls GET `health` until it answers 200. Raises BenchmarkError, with the server's output, when
    the server exits before that or does not answer within `timeout` seconds, when it runs on
    another event loop than `_eventloop.LOOP`, or when it exits while the block runs.
    """
    server = ProcessServer(list(cmd), cwd, env)
    try:
        try:
            server.wait(health, timeout)
        except (RuntimeError, TimeoutError) as exc:
            raise BenchmarkError(
                f"server `{shlex.join(cmd)}` did not come up: {exc}\n--- its output ---\n{tail(server.log())}"
            ) from None
        loop = _eventloop.of_process(server.proc.pid)
        if loop != _eventloop.LOOP:
            raise BenchmarkError(
                f"server `{shlex.join(cmd)}` runs on {loop}, not {_eventloop.LOOP}: install {_eventloop.LOOP} in its venv"
            )
        yield Server(server.url, server.proc.pid, loop)
        if server.proc.poll() is not None:
            raise BenchmarkError(
                f"server `{shlex.join(cmd)}` exited with {server.proc.returncode} during the run:\n{tail(server.log())}"
            )
    finally:
        server.stop()
        server.log_path.unlink(missing_ok=True)


Runs = dict[str, dict[int, list[dict[str, Any]]]]


def interleaved_runs(
    stacks: dict[str, dict[str, Any]],
    rounds: int,
    levels: Sequence[int],
    drive: Callable[[str, str, str, int], dict[str, Any]],
    loops: dict[str, dict[str, str | None]],
    describe: Callable[[dict[str, Any]], str],
    server_env: dict[str, str] | None = None,
) -> Runs:
    """Round by round, each stack's server then its driver at each session count (machine noise hits all alike).

    `drive(python, kind, url, sessions)` returns one run's result with the `loop` it ran on; a
    driver on another loop than the benchmarks' fails the run. Each contestant's loops are recorded
    in `loops`. Returns every run's result by stack and session count.
    """
    runs: Runs = {}
    for r in range(rounds):
        for name, spec in stacks.items():
            with serve(spec["server"], spec["cwd"], {**(server_env or {}), **spec["env"]}) as srv:
                python, kind = spec["client"]
                for n in levels:
                    res = drive(python, kind, srv.url, n)
                    if res["loop"] != _eventloop.LOOP:
                        raise BenchmarkError(f"the {name} driver ran on {res['loop']}, not {_eventloop.LOOP}")
                    loops[name] = {"client": res["loop"], "server": srv.loop}
                    runs.setdefault(name, {}).setdefault(n, []).append(res)
                    print(f"  round {r + 1} {name:8s} {n:3d} sessions: {describe(res)}", file=sys.stderr)
    return runs


def upstream_stack(upstream_python: str, module: str, transport: str = "defaults") -> dict[str, Any]:
    """Upstream's contestant: its own venv's uvicorn serving `benchmarks/<module>.py`'s `app`.

    `transport="defaults"`: uvicorn's defaults as openenv-core installs it (h11, per-message
    compression on, a backlog of 2,048), but for the loop. `"ours"`: the transport settings our
    server runs with (`ours_transport_flags`), so that the gap left is the stacks above it.
    """
    server = [upstream_python, "-m", "uvicorn", f"{module}:app", "--loop", _eventloop.LOOP, "--log-level", "warning"]
    if transport == "defaults":
        server += ["--http", "h11"]  # what "auto" picks without httptools, which openenv-core does not install
    elif transport == "ours":
        server += ours_transport_flags()
    else:
        raise ValueError(f"unknown transport {transport!r}: 'defaults' or 'ours'")
    return {"server": server, "cwd": HERE, "client": (upstream_python, "upstream"), "env": UPSTREAM_ENV}


def ours_transport_flags() -> list[str]:
    """uvicorn command-line flags for the transport our env server runs with (`uvicorn_options`)."""
    from openenv.server.run import uvicorn_options

    o = uvicorn_options()
    return [
        "--http",
        str(o["http"]),
        "--ws",
        str(o["ws"]),
        "--ws-per-message-deflate",
        str(o["ws_per_message_deflate"]).lower(),
        "--backlog",
        str(o["backlog"]),
    ]


def ours_stack(env_name: str, client: str = "ours") -> dict[str, Any]:
    """Our contestant: `python -m openenv.server` serving the bundled env `envs/<env_name>`."""
    server = [sys.executable, "-m", "openenv.server", "server.app:app", "--log-level", "warning"]
    return {"server": server, "cwd": ROOT / "envs" / env_name, "client": (sys.executable, client), "env": {}}


def describe_stacks(stacks: dict[str, dict[str, Any]], upstream_python: str) -> dict[str, dict[str, str]]:
    """What each contestant ran, for the results file: its venv, server command line and client."""
    return {
        name: {
            "venv": "upstream" if spec["server"][0] == upstream_python else "ours",
            "server": shlex.join(["python", *spec["server"][1:]]),
            "client": spec["client"][1],
        }
        for name, spec in stacks.items()
    }


def require_loop(python: str) -> str:
    """The version of the benchmarks' loop in `python` (e.g. upstream's venv); fails when it is missing."""
    code = f"import importlib.metadata as m, {_eventloop.LOOP}; print(m.version({_eventloop.LOOP!r}))"
    what = f"{_eventloop.LOOP} in {python} (`bash scripts/upstream-venv` installs it into upstream's venv)"
    return run_checked([python, "-c", code], what=what, timeout=60).stdout.strip()


def add_upstream_argument(parser: Any) -> None:
    """`--upstream-python`: the venv with upstream's openenv-core (default: the one scripts/upstream-venv makes)."""
    parser.add_argument(
        "--upstream-python", default=str(DEFAULT_UPSTREAM), help="python of a venv with openenv-core==0.3.0"
    )


def require_upstream(python: str) -> None:
    """Both sides can run on the benchmarks' loop: ours here, upstream's in its venv at `python`."""
    if not Path(python).exists():
        raise BenchmarkError(f"no upstream venv at {python}: run `bash scripts/upstream-venv` first")
    _eventloop.require()
    require_loop(python)


def entry(main: Callable[[], None]) -> None:
    """Run a benchmark's `main`; a BenchmarkError ends it with its message and exit status 1."""
    try:
        main()
    except BenchmarkError as exc:
        sys.exit(f"{Path(sys.argv[0]).name}: FAILED: {exc}")
