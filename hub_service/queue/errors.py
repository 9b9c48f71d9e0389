"""What a job that must be tried again raises, and the reason codes it carries."""

from __future__ import annotations

import traceback
from enum import StrEnum

__all__ = ["Transient", "WaitCode", "describe_exception"]


class WaitCode(StrEnum):
    """Why a run waits for the infrastructure (`Transient.code`, `EnvVersion.waiting_code`): the
    values of `openenv.images.ImageBuildError`'s infrastructure reasons, the source, or other."""

    NO_ENGINE = "no_engine"
    ENGINE_LOST = "engine_lost"
    BASE_IMAGE = "base_image"
    NETWORK = "network"
    NO_BUILDKIT = "no_buildkit"
    # The host is not set up as the Hub's settings ask (a runtime missing or not honoured, a runtime the
    # engine cannot pick, a runtime it cannot verify): the operator's to fix, never counted against the env.
    HOST_SETUP = "host_setup"
    SOURCE = "source"
    REGISTRY = "registry"  # the publish stage's push was not taken
    OTHER = "other"


class Transient(Exception):
    """Something outside the environment failed; the job should be retried.

    `code` (a `WaitCode`) says what, set where the trouble is found: never recognised later by
    the message's words.
    """

    NO_ENGINE = WaitCode.NO_ENGINE
    ENGINE_LOST = WaitCode.ENGINE_LOST
    HOST_SETUP = WaitCode.HOST_SETUP
    BASE_IMAGE = WaitCode.BASE_IMAGE
    NETWORK = WaitCode.NETWORK
    SOURCE = WaitCode.SOURCE
    REGISTRY = WaitCode.REGISTRY
    OTHER = WaitCode.OTHER
    ENGINE = frozenset({WaitCode.NO_ENGINE, WaitCode.ENGINE_LOST})  # what an engine that answers again may have fixed

    def __init__(self, message: str, code: str = WaitCode.OTHER) -> None:
        super().__init__(message)
        self.code = WaitCode(code)
        self.stage: str | None = None  # the pipeline stage it stopped (set by the runner)


def describe_exception(exc: BaseException) -> str:
    """`Type: message` of an exception, as a one-line reason."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()
