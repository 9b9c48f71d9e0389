"""Errors of play sessions: each one says what the visitor can do about it."""

from __future__ import annotations

import re

from hub_service.errors import HubError, scrub_addresses

__all__ = [
    "NotPlayable",
    "PlayError",
    "PlayLimit",
    "PlayStartError",
    "describe_env_failure",
    "scrub_addresses",
    "without_addresses",
]


class PlayError(HubError):
    """A play or model-try session could not be used."""

    status, code = 400, "play_error"


class PlayLimit(PlayError):
    """Too many sessions: this visitor's, or everybody's together."""

    status, code = 429, "too_many_sessions"


class AllInUse(PlayLimit):
    """Every env instance this Hub may run for visitors is in active use (none idle to reclaim)."""

    status, code = 429, "all_instances_in_use"


class NotPlayable(PlayError):
    """The env has no version that passed the Hub's checks and no live Space."""

    status, code = 409, "not_playable"


class PlayStartError(PlayError):
    """The env's server did not start or could not be reached."""

    status, code = 502, "play_start_failed"


# Any URL with a scheme: a visitor playing an env never needs an address of its server, whatever its
# host (an IP or localhost, which `scrub_addresses` knows, or a container's or a cluster's name).
_ANY_URL = re.compile(r"\b(?:https?|wss?)://[^\s\]\)\"'<>]+")
# A host name (with a dot or a hyphen, unlike words before a colon) and a port, with no scheme
# ("atari-7f3c:8000", "host.docker.internal:8000").
_HOST_PORT = re.compile(r"(?<![\w./:@-])[A-Za-z][\w-]*[.-][\w.-]*:\d{2,5}\b")


def without_addresses(text: str) -> str:
    """`text` without any server's address, whatever its host (what a play panel may show)."""
    text = scrub_addresses(text)
    text = _ANY_URL.sub(lambda m: "the env's server" + m.group(0)[len(m.group(0).rstrip(".,;:!?")) :], text)
    return _HOST_PORT.sub("the env's server", text)


def describe_env_failure(exc: BaseException) -> str:
    """One line for a visitor: the env's own words when the env refused or failed, else what went
    wrong between the Hub and the env's server (not the env's fault); never an internal address."""
    from openenv.errors import (
        CapacityReachedError,
        EnvConnectionError,
        EnvDisconnectedError,
        EnvFactoryError,
        EnvServerError,
        EnvTimeoutError,
        InvalidActionError,
    )

    if isinstance(exc, InvalidActionError):
        details = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'action'}: {e.get('msg', '')}"
            for e in exc.errors[:5]
            if isinstance(e, dict)
        )
        return without_addresses(f"the env refused this action: {details or exc.data.get('message') or exc}")
    if isinstance(exc, CapacityReachedError):
        return "the env's server has no room for another session now; try again in a few minutes"
    if isinstance(exc, EnvFactoryError):
        return without_addresses(
            f"the env could not start a session: {exc.data.get('message') or exc}; press Reset to try again"
        )
    if isinstance(exc, EnvServerError):
        words = str(exc.data.get("message") or "").strip() or str(exc)
        return without_addresses(f"the env says: {words}")
    if isinstance(exc, EnvTimeoutError):
        return "the env did not answer in time; try again, or press Reset for a new session"
    if isinstance(exc, EnvDisconnectedError):
        text = without_addresses(str(exc))
        if "play_max_reply_mb" in text:  # the Hub's own limit, named by PlaySession
            return text
        return "the connection to the env's server ended; press Reset to start a new session"
    if isinstance(exc, EnvConnectionError):
        return "the Hub cannot reach the env's server right now (not the env's fault); press Reset to try again"
    return without_addresses(str(exc)) or type(exc).__name__
