"""The machine's part in a build: the Docker engine (there, restarted, reachable) and its network."""

from __future__ import annotations

import re
from typing import Any

from openenv.images._errors import ImageBuildError

__all__ = [
    "LABEL_PREFIX",
    "docker_client",
    "engine_change",
    "engine_epoch",
    "engine_settles",
    "engine_trouble",
    "is_transport_error",
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
    from openenv.engines import engine_of

    return engine_of(client).epoch(client)


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


def engine_change(
    client: Any, *, epoch: str | None = None, started_within_s: float | None = None, answer_s: float | None = None
) -> str | None:
    """What happened to the engine, in words ("stopped answering (...)", "restarted", "did not
    answer within 10s"), or None when it answers as before. Asked over a new connection
    (`ping_anew`); "restarted" when its epoch is no longer `epoch`, or it started less than
    `started_within_s` seconds ago. With `answer_s` the question is asked in a thread of its own and
    an engine that takes longer (it hangs) is what happened. `client` None: a client of the
    selected engine is made for the question (its making counts as the engine's answer)."""
    found: dict[str, Any] = {}

    def ask() -> None:
        try:
            asked = client if client is not None else docker_client()
            ping_anew(asked)
            found["epoch"] = engine_epoch(asked) if epoch is not None else None
            found["age"] = engine_age_s(asked) if started_within_s is not None else None
        except Exception as exc:  # no answer: gone, or refusing
            found["error"] = exc

    if answer_s is None:
        ask()
    else:
        import threading

        asking = threading.Thread(target=ask, name="openenv-engine-question", daemon=True)
        asking.start()
        asking.join(answer_s)
        if asking.is_alive():
            return f"did not answer within {answer_s:g}s"
    if "error" in found:
        return f"stopped answering ({found['error']})"
    if epoch is not None and found.get("epoch") is not None and found["epoch"] != epoch:
        return "restarted"
    age = found.get("age")
    if started_within_s is not None and age is not None and age < started_within_s:
        return f"restarted ({age:.0f}s ago)"
    return None


def engine_trouble(client: Any, epoch: str | None, log: str, *, lost: bool = False) -> ImageBuildError | None:
    """The engine's part in a failed build: gone, restarted since `epoch`, or (`lost`) the
    connection to it broke; None when it answers as before (the build itself failed)."""
    change = engine_change(client, epoch=epoch)
    if change is not None and change.startswith("stopped answering"):
        return ImageBuildError(
            f"the container engine {change} during the build; the build will be tried again once it is back",
            log,
            reason=ImageBuildError.ENGINE_LOST,
        )
    if change is not None:
        return ImageBuildError(
            f"the container engine {change} during the build; the build will be tried again",
            log,
            reason=ImageBuildError.ENGINE_LOST,
        )
    if lost:
        return ImageBuildError(
            "the connection to the container engine broke during the build; the build will be tried again",
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
