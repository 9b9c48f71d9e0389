"""Base images: each one a Dockerfile builds FROM is in the engine before the build, or pulled, or
replaced by the registry-free local base: through the Dockerfile's `ARG BASE_IMAGE` when it has
one, or, for the images the local base faithfully stands in for (Python 3.11 on Debian bookworm,
and upstream OpenEnv's base, which is that plus uv and curl), by tagging the local base with the
name the Dockerfile asks for. Either way the build log says so in one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openenv.dockerfile import base_images
from openenv.images._errors import ImageBuildError

__all__ = ["LOCAL_BASE_IMAGE", "ensure_base_images"]

# The registry-free base image `scripts/base-image` builds from Debian's packages. A Dockerfile whose
# `ARG BASE_IMAGE` default cannot be pulled builds on it when it is in the engine.
LOCAL_BASE_IMAGE = "openenv-local/python:3.11"
# Images the local base stands in for when a Dockerfile names one itself and no registry serves it.
STAND_IN_FOR = frozenset(
    {
        "python:3.11",
        "python:3.11-slim",
        "python:3.11-bookworm",
        "python:3.11-slim-bookworm",
        "ghcr.io/meta-pytorch/openenv-base:latest",
        "ghcr.io/huggingface/openenv-base:latest",
    }
)


def ensure_base_images(
    client: Any,
    dockerfile_text: str,
    args: dict[str, str],
    *,
    explicit_base: bool,
    on_log: Callable[[str], None] | None,
) -> None:
    """Make sure every base image is in the engine before the build: pull what is missing. When
    the `BASE_IMAGE` default cannot be pulled (no registry here) and nobody chose a base image,
    build on LOCAL_BASE_IMAGE if the engine has it; when the Dockerfile names an image of
    STAND_IN_FOR itself, tag LOCAL_BASE_IMAGE with that name (each said in the log); otherwise
    fail with what to do.

    Raises:
        ImageBuildError: a base image is missing and cannot be pulled (reason BASE_IMAGE).
    """
    for image, from_base in base_images(dockerfile_text, args):
        if _has_image(client, image):
            continue
        error = _pull(client, image)
        if error is None:
            if on_log is not None:
                on_log(f"pulled base image {image}")
            continue
        if from_base and not explicit_base and _has_image(client, LOCAL_BASE_IMAGE):
            args["BASE_IMAGE"] = LOCAL_BASE_IMAGE
            if on_log is not None:
                on_log(
                    f"base image {image} cannot be pulled ({error}); building on {LOCAL_BASE_IMAGE}, made from Debian packages"
                )
            continue
        if _normal(image) in STAND_IN_FOR and _has_image(client, LOCAL_BASE_IMAGE):
            repo, _, tag = _normal(image).rpartition(":")
            client.images.get(LOCAL_BASE_IMAGE).tag(repo, tag)
            if on_log is not None:
                on_log(
                    f"base image {image} cannot be pulled ({error}); {LOCAL_BASE_IMAGE} (Python 3.11 on Debian bookworm, with pip, "
                    f"uv and curl) stands in for it in this engine"
                )
            continue
        hint = (
            (
                "pass another base image (`openenv build --base-image IMAGE`, OPENENV_BASE_IMAGE, or the Hub's OPENENV_HUB_BASE_IMAGE: "
                "any image with Python >= 3.11 and pip), or make the registry-free one with `bash scripts/base-image` in an "
                f"openenv-hub checkout ({LOCAL_BASE_IMAGE})"
            )
            if from_base
            else (
                f"this Dockerfile names {image} itself; pull or load it into the engine (docker pull / docker load), or make the "
                "Dockerfile take `ARG BASE_IMAGE` so another base can be passed"
            )
        )
        raise ImageBuildError(
            f"base image {image} is not in the Docker engine and cannot be pulled ({error}); {hint}",
            reason=ImageBuildError.BASE_IMAGE,
        )


def _normal(image: str) -> str:
    """`docker.io/library/python:3.11-slim` and `python:3.11-slim` are one name; no tag means latest."""
    name = image.removeprefix("docker.io/").removeprefix("library/")
    return name if ":" in name.rsplit("/", 1)[-1] or "@" in name else f"{name}:latest"


def _has_image(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:  # docker.errors.ImageNotFound, or an invalid name: not usable as is
        return False
    return True


def _pull(client: Any, image: str) -> str | None:
    """Pull `image`; None on success, else the engine's reason in one line."""
    repo, tag = image, None
    if "@" not in image:
        last = image.rsplit("/", 1)[-1]
        if ":" in last:
            repo, tag = image.rsplit(":", 1)
    try:
        client.images.pull(repo, tag=tag or "latest") if "@" not in image else client.images.pull(image)
    except Exception as exc:  # registry unreachable, no such image, not authorised: all mean "cannot pull"
        text = str(getattr(exc, "explanation", None) or exc)
        return " ".join(text.split())[:300]
    return None
