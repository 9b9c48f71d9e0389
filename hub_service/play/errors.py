"""Errors of play sessions: each one says what the visitor can do about it."""

from __future__ import annotations

from hub_service.errors import HubError

__all__ = ["NotPlayable", "PlayError", "PlayLimit", "PlayStartError"]


class PlayError(HubError):
    """A play or model-try session could not be used."""

    status, code = 400, "play_error"


class PlayLimit(PlayError):
    """Too many sessions: this visitor's, or everybody's together."""

    status, code = 429, "too_many_sessions"


class NotPlayable(PlayError):
    """The env has no version that passed the Hub's checks and no live Space."""

    status, code = 409, "not_playable"


class PlayStartError(PlayError):
    """The env's server did not start or could not be reached."""

    status, code = 502, "play_start_failed"
