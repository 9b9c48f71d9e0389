"""The error of image builds, with whose problem it is."""

from __future__ import annotations

from dataclasses import dataclass, field

from openenv.errors import OpenEnvError
from openenv.images._signs import FailedStep

__all__ = ["BuildResult", "ImageBuildError"]


class ImageBuildError(OpenEnvError):
    """The image could not be built; `log` holds the build output.

    `reason` says whose problem it is: the env's (`FAILED`: its Dockerfile failed to build;
    `NO_DOCKERFILE`; `NO_SUCH_IMAGE`: its registry answered that it has no such base image, or will
    not serve it), or the machine's (`NO_ENGINE`: no Docker engine answers; `ENGINE_LOST`: the
    engine went away or restarted during the build; `BASE_IMAGE`: a base image is neither in the
    engine nor pullable; `NETWORK`: the build's containers cannot resolve names at all (DNS down);
    `NO_BUILDKIT`: the Dockerfile needs BuildKit and no BuildKit client is installed; `HOST_SETUP`:
    the engine cannot run the network probe under the runtime it was asked for); or neither
    (`TIMEOUT`; `TOO_BIG`: it wrote more than its disk cap and was stopped; `PROCESS_CAP`: a RUN
    step failed while the steps were at their process cap; `SDK`: the local SDK wheel did not
    build, or an argument is wrong).
    """

    FAILED = "failed"
    NO_DOCKERFILE = "no_dockerfile"
    NO_SUCH_IMAGE = "no_such_image"
    NO_ENGINE = "no_engine"
    ENGINE_LOST = "engine_lost"
    BASE_IMAGE = "base_image"
    NETWORK = "network"
    NO_BUILDKIT = "no_buildkit"
    HOST_SETUP = "host_setup"
    TIMEOUT = "timeout"
    TOO_BIG = "too_big"
    PROCESS_CAP = "process_cap"
    SDK = "sdk"
    INFRASTRUCTURE = frozenset({NO_ENGINE, ENGINE_LOST, BASE_IMAGE, NETWORK, NO_BUILDKIT, HOST_SETUP})

    def __init__(
        self,
        message: str,
        log: str = "",
        reason: str = FAILED,
        exit_code: int | None = None,
        step: FailedStep | None = None,
    ) -> None:
        super().__init__(message)
        self.log = log
        self.reason = reason
        self.exit_code = exit_code  # of the RUN step that failed, when one did
        self.step = step  # the Dockerfile step the build stopped at, when the log names it

    @property
    def infrastructure(self) -> bool:
        """True when the machine, not the env, kept the image from building (retrying may help)."""
        return self.reason in self.INFRASTRUCTURE


@dataclass
class BuildResult:
    tag: str
    image_id: str
    seconds: float
    log: list[str] = field(default_factory=list)
    sdk: str = "published"
    builder: str = "classic"  # "buildkit" or "classic"
    cache_mounts: list[str] = field(default_factory=list)  # the scoped ids of its RUN cache mounts (cache_scope)
    cache_mounts_dropped: list[str] = field(default_factory=list)  # those left out: a variable in their options
