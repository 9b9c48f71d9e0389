"""The one place that reads the words of programs outside the SDK (the Docker engine, the docker
CLI, BuildKit, a build step's tools) to tell whose trouble a failed build is. Everything else
classifies by the reason codes (`ImageBuildError.reason`) set from these answers."""

from __future__ import annotations

import re

__all__ = ["cli_lost_engine", "engine_hook_failed", "engine_hook_lost", "network_trouble_signs", "step_exit_codes"]

# The engine's own failures to start a step's container (its network set-up hook, say, while it is
# still coming up after a restart). BuildKit reports them as the step failing with exit code 1, so
# the log is read; a step could print these words itself, so they count only within a short while
# of the engine's start, which no env controls.
_ENGINE_SIGNS = re.compile(r"error running hook|libnetwork|failed to create shim", re.I)
# The engine's own network hook could not reach the engine (its socket is gone or not there yet):
# no Dockerfile can cause that, however long the engine has been up.
_ENGINE_HOOK_LOST = re.compile(r"libnetwork/[0-9a-f]+\.sock: connect: (no such file|connection refused)", re.I)

# What the docker CLI prints when it cannot reach the engine (not the build's doing).
_UNREACHABLE = re.compile(
    r"cannot connect to the docker daemon|failed to dial grpc|error during connect|dial unix [^:]+: connect:|"
    r"rpc error: code = unavailable|connection reset by peer|transport is closing",
    re.I,
)
# "executor failed running [/bin/sh -c ...]: exit code: 3" (BuildKit 0.8, Docker 20.10) or
# 'process "/bin/sh -c ..." did not complete successfully: exit code: 3' (newer).
_STEP_EXIT = re.compile(r"(?:executor failed running \[.*?\]|did not complete successfully): exit code: (\d+)", re.S)

# What a RUN step prints when it cannot reach the network (pip, apt, curl, npm, git): worth a probe.
_NETWORK_SIGNS = re.compile(
    r"temporary failure in name resolution|temporary failure resolving|could not resolve host|name or service not "
    r"known|failed to establish a new connection|network is unreachable|getaddrinfo|eai_again|connection timed out",
    re.I,
)


def engine_hook_failed(text: str) -> bool:
    """The log shows the engine failing to start a step's container (its network hook, a shim)."""
    return bool(_ENGINE_SIGNS.search(text))


def engine_hook_lost(text: str) -> bool:
    """The engine's own network hook could not reach the engine: never a Dockerfile's doing."""
    return bool(_ENGINE_HOOK_LOST.search(text))


def cli_lost_engine(text: str) -> bool:
    """The docker CLI says it cannot reach (or lost) the engine."""
    return bool(_UNREACHABLE.search(text))


def step_exit_codes(text: str) -> list[int]:
    """The exit codes of the failed RUN steps BuildKit names, in order."""
    return [int(code) for code in _STEP_EXIT.findall(text)]


def network_trouble_signs(log: str) -> bool:
    """A RUN step's output shows it could not reach the network (worth a probe of the resolver)."""
    return bool(_NETWORK_SIGNS.search(log))
