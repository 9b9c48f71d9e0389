"""The machine's part in a build: the Docker engine (there, restarted, reachable) and its network."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from openenv.dockerfile import base_images
from openenv.images._errors import ImageBuildError

__all__ = [
    "LABEL_PREFIX",
    "Probed",
    "docker_client",
    "engine_epoch",
    "engine_settles",
    "engine_trouble",
    "is_transport_error",
    "network_trouble",
    "ping_anew",
]

LABEL_PREFIX = "org.openenv"


def docker_client() -> Any:
    """The selected engine's client (`openenv.engines`), for a build.

    Raises:
        ImageBuildError: the docker SDK is missing (SDK) or no engine answers (NO_ENGINE).
    """
    from openenv.engines import engine
    from openenv.errors import ProviderUnavailableError

    try:
        import docker  # noqa: F401
    except ImportError as exc:
        raise ImageBuildError(
            "building images needs the docker SDK: pip install 'openenv-hub[docker]'", reason=ImageBuildError.SDK
        ) from exc
    try:
        return engine().new_client()
    except ProviderUnavailableError as exc:
        raise ImageBuildError(str(exc), reason=ImageBuildError.NO_ENGINE) from exc


def engine_epoch(client: Any) -> str | None:
    """A value that changes whenever the engine restarts (None when it cannot tell): see
    `ContainerEngine.epoch` (Docker makes its default `bridge` network anew at every start)."""
    from openenv.engines import engine

    return engine().epoch(client)


def engine_age_s(client: Any) -> float | None:
    """Seconds since the engine last started (from its default bridge's creation), or None."""
    import datetime as dt

    created = engine_epoch(client)
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?", created or "")
    if match is None:
        return None
    started = dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.UTC)
    fraction = float(match.group(2) or 0)
    return (dt.datetime.now(dt.UTC) - started).total_seconds() - fraction


def ping_anew(client: Any) -> None:
    """Ask the engine whether it answers, over a connection opened now.

    A stopping dockerd closes its socket at once but goes on answering, for as long as it takes to
    stop (10 s and more), on connections already open: a ping from the client's pool of kept-alive
    connections says "ok" while a new connection is refused. So the pool's idle connections are
    closed first (requests in flight finish on theirs); the client stays usable.

    Raises:
        Exception: whatever the client raises when the engine does not answer.
    """
    close = getattr(getattr(client, "api", None), "close", None)
    if callable(close):
        close()
    client.ping()


def engine_trouble(client: Any, epoch: str | None, log: str, *, lost: bool = False) -> ImageBuildError | None:
    """The engine's part in a failed build: gone, restarted since `epoch`, or (`lost`) the
    connection to it broke; None when it answers as before (the build itself failed)."""
    try:
        ping_anew(client)
    except Exception as exc:
        return ImageBuildError(
            f"the Docker engine stopped answering during the build ({exc}); the build will be tried again once it is back",
            log,
            reason=ImageBuildError.ENGINE_LOST,
        )
    now = engine_epoch(client)
    if epoch is not None and now is not None and now != epoch:
        return ImageBuildError(
            "the Docker engine restarted during the build; the build will be tried again",
            log,
            reason=ImageBuildError.ENGINE_LOST,
        )
    if lost:
        return ImageBuildError(
            "the connection to the Docker engine broke during the build; the build will be tried again",
            log,
            reason=ImageBuildError.ENGINE_LOST,
        )
    return None


def engine_settles(client: Any, epoch: str | None, log: str, seconds: float) -> ImageBuildError | None:
    """`engine_trouble`, asked every half second for `seconds`: the first trouble seen, or None
    when the engine answered as before all along."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        trouble = engine_trouble(client, epoch, log)
        if trouble is not None or time.monotonic() >= deadline:
            return trouble
        time.sleep(0.5)


# Names any build network that reaches the internet resolves.
PROBE_HOSTS = ("pypi.org", "deb.debian.org")
_PROBE = """import socket, sys
down = []
for host in sys.argv[1:]:
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            down.append(host)
print(" ".join(down))
"""


class Probed(NamedTuple):
    """What a probe container said after a RUN step failed: `trouble` when the machine's network is
    down; `refused` when the engine could not start a container from the build's base image, which
    it holds, at all (False whenever there was nothing to try)."""

    trouble: ImageBuildError | None
    refused: bool


def network_trouble(
    client: Any,
    dockerfile_text: str,
    args: dict[str, str],
    network_mode: str | None,
    log: str,
    *,
    offline: bool = False,
) -> Probed:
    """After a RUN step failed, ask a container on the build's network (from the build's base image)
    to resolve well-known names: if the resolver itself cannot be reached (EAI_AGAIN), the machine's
    network is down, not the env broken. What the step printed plays no part (it could print
    anything). An unknown name (a typo in the env's index URL) resolves to "no such host" and stays
    the env's failure. A build kept off the network on purpose (`offline`) gets the same container
    with no network and no names to resolve: it still shows whether the engine can start one."""
    images = base_images(dockerfile_text, args)
    if not images:
        return Probed(None, refused=False)
    import docker.errors

    try:
        client.images.get(images[0][0])
    except Exception:  # not in the engine's image store (BuildKit's pull, say): nothing to start it from
        return Probed(None, refused=False)
    try:
        out = client.containers.run(
            images[0][0],
            ["python3", "-c", _PROBE, *([] if offline else PROBE_HOSTS)],
            network_mode="none" if offline else network_mode or "bridge",
            remove=True,
            labels={f"{LABEL_PREFIX}.built-by": "openenv", f"{LABEL_PREFIX}.probe": "network"},
        )
    except docker.errors.ContainerError:  # it ran and exited non-zero: the engine starts containers
        return Probed(None, refused=False)
    except Exception:  # the engine could not start it (stopping, say), or the image has no python3
        return Probed(None, refused=True)
    down = (out.decode() if isinstance(out, bytes) else str(out)).split()
    if not down:
        return Probed(None, refused=False)
    return Probed(
        ImageBuildError(
            f"the build could not reach the network: containers on the engine's build network cannot resolve "
            f"{', '.join(down)} (the DNS resolver does not answer); the build will be tried again",
            log,
            reason=ImageBuildError.NETWORK,
        ),
        refused=False,
    )


def is_transport_error(exc: BaseException) -> bool:
    """An error of the connection to the engine (reset, closed mid-stream), not one the engine sent."""
    import requests

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(
            current, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError, ConnectionError)
        ):
            return True
        if type(current).__module__.startswith("urllib3") and type(current).__name__ in (
            "ProtocolError",
            "ReadTimeoutError",
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
