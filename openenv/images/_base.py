"""Base images: each one a Dockerfile builds FROM is in the engine before the build, or pulled, or
replaced by the registry-free local base: through the Dockerfile's `ARG BASE_IMAGE` when it has
one, or, for the images the local base faithfully stands in for (python:3.11-slim's layout, and
upstream OpenEnv's base, which is that plus its preinstalled packages), by building FROM the local
base in their place, in this build's own copy of the Dockerfile (the engine's names are never
changed). Either way the build log says which base served it. An image that cannot be had is the
env's failure only when its registry answers so (`_registry`), never by the engine's words."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from openenv.dockerfile import base_images
from openenv.images._errors import ImageBuildError

__all__ = ["LOCAL_BASE_IMAGE", "LOCAL_UPSTREAM_BASE", "ensure_base_images", "with_stand_ins"]

# The registry-free base image `scripts/base-image` builds from Debian packages, laid out as python:3.11-slim
# is (/usr/local prefix, pip, Python's headers, no compiler). A Dockerfile whose `ARG BASE_IMAGE` default
# cannot be pulled builds on it when it is in the engine.
LOCAL_BASE_IMAGE = "openenv-local/python:3.11"
# Built on it by the same script: upstream OpenEnv's base (what its core preinstalls, WORKDIR /app).
LOCAL_UPSTREAM_BASE = "openenv-local/openenv-base:latest"
# Images a local base stands in for when a Dockerfile names one and no registry serves it.
UPSTREAM_BASES = frozenset(
    {"ghcr.io/meta-pytorch/openenv-base:latest", "ghcr.io/huggingface/openenv-base:latest", "openenv-base:latest"}
)
STAND_IN_FOR = frozenset(
    {"python:3.11", "python:3.11-slim", "python:3.11-bookworm", "python:3.11-slim-bookworm", *UPSTREAM_BASES}
)


def _stand_in(client: Any, image: str) -> tuple[str, str] | None:
    """The local image that stands in for `image` here, and what it is, or None."""
    name = _normal(image)
    if name in UPSTREAM_BASES and _has_image(client, LOCAL_UPSTREAM_BASE):
        return (
            LOCAL_UPSTREAM_BASE,
            "the registry-free stand-in for openenv-base: python:3.11-slim's layout and the packages upstream's base preinstalls",
        )
    if name in STAND_IN_FOR and _has_image(client, LOCAL_BASE_IMAGE):
        lacks = "; without the packages openenv-base preinstalls" if name in UPSTREAM_BASES else ""
        return LOCAL_BASE_IMAGE, f"the registry-free stand-in for python:3.11-slim, made from Debian packages{lacks}"
    return None


def ensure_base_images(
    client: Any,
    dockerfile_text: str,
    args: dict[str, str],
    *,
    explicit_base: bool,
    on_log: Callable[[str], None] | None,
) -> dict[str, str]:
    """Make sure every base image is in the engine before the build: pull what is missing. When
    the `BASE_IMAGE` default cannot be pulled (no registry here) and nobody chose a base image,
    build on LOCAL_BASE_IMAGE if the engine has it; when the Dockerfile names an image of
    STAND_IN_FOR itself, build on LOCAL_BASE_IMAGE in its place, for this build only (the returned
    map; the engine's names are left alone); otherwise fail, the registry's own answer saying whose
    trouble it is. The log says which base serves the build.

    Returns:
        {image the Dockerfile names: the image to build FROM in its place}.

    Raises:
        ImageBuildError: a base image is missing and cannot be pulled: `NO_SUCH_IMAGE` when its
            registry answers that it has no such image (or will not serve it), else `BASE_IMAGE`.
    """
    say = on_log or (lambda line: None)
    stand_ins: dict[str, str] = {}
    for image, from_base in base_images(dockerfile_text, args):
        if _has_image(client, image):
            say(f"base image {image} ({_image_id(client, image)}) serves this build, as the engine has it")
            continue
        error = _pull(client, image)
        if error is None:
            say(f"pulled base image {image} ({_image_id(client, image)}); it serves this build")
            continue
        if from_base and not explicit_base:
            local = _stand_in(client, image) or (
                (LOCAL_BASE_IMAGE, "the registry-free base, made from Debian packages")
                if _has_image(client, LOCAL_BASE_IMAGE)
                else None
            )
            if local is not None:
                args["BASE_IMAGE"] = local[0]
                say(
                    f"base image {image} cannot be pulled ({error}); {local[0]} ({_image_id(client, local[0])}, {local[1]}) "
                    "serves this build in its place"
                )
                continue
        local = None if from_base else _stand_in(client, image)
        if local is not None:
            stand_ins[image] = local[0]
            say(
                f"base image {image} cannot be pulled ({error}); {local[0]} ({_image_id(client, local[0])}, {local[1]}) "
                "serves this build in its place (for this build only)"
            )
            continue
        raise _unavailable(image, from_base, explicit_base, error)
    return stand_ins


def _unavailable(image: str, from_base: bool, explicit_base: bool, error: str) -> ImageBuildError:
    """Why `image` cannot be had: the Hub's own choice of base (`explicit_base`), the machine, or the env."""
    from openenv.engines import engine

    if from_base and explicit_base:  # the base image whoever runs the build chose: their machine's trouble
        return ImageBuildError(
            f"base image {image} is not in the {engine().label} and cannot be pulled ({error}); pass another base image "
            "(`openenv build --base-image IMAGE`, OPENENV_BASE_IMAGE, or the Hub's OPENENV_HUB_BASE_IMAGE: any image with "
            f"Python >= 3.11 and pip), or make the registry-free one with `bash scripts/base-image` ({LOCAL_BASE_IMAGE})",
            reason=ImageBuildError.BASE_IMAGE,
        )
    from openenv.images._registry import ask_registry

    answer = ask_registry(image)  # its HTTP status, not the words of the engine's error: nothing a build prints
    if answer.envs_fault:
        return ImageBuildError(
            f"base image {image} cannot be pulled: {answer.detail}; the Dockerfile must build FROM an image its registry "
            "serves publicly (check the name and tag)",
            reason=ImageBuildError.NO_SUCH_IMAGE,
        )
    hint = (
        "pass another base image (`openenv build --base-image IMAGE` or OPENENV_BASE_IMAGE), or make the registry-free one "
        f"with `bash scripts/base-image` in an openenv-hub checkout ({LOCAL_BASE_IMAGE})"
        if from_base
        else f"this Dockerfile names {image} itself; pull or load it into the engine ({engine().kind} pull / {engine().kind} load), or make "
        "the Dockerfile take `ARG BASE_IMAGE` so another base can be passed"
    )
    return ImageBuildError(
        f"base image {image} is not in the {engine().label} and cannot be pulled: {answer.detail} (the engine said: {error}); "
        f"{hint}",
        reason=ImageBuildError.BASE_IMAGE,
    )


_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)", re.I | re.M)


def with_stand_ins(dockerfile_text: str, stand_ins: dict[str, str], args: dict[str, str]) -> str:
    """The Dockerfile with each FROM of an image in `stand_ins` building FROM its stand-in instead."""
    if not stand_ins:
        return dockerfile_text
    wanted = {_normal(image): local for image, local in stand_ins.items()}

    def swap(match: re.Match[str]) -> str:
        token = match.group(2)
        found = base_images(f"{_global_args(dockerfile_text)}FROM {token}\n", args)
        image = found[0][0] if found else token
        local = wanted.get(_normal(image))
        return f"{match.group(1)}{local}" if local else match.group(0)

    return _FROM.sub(swap, dockerfile_text)


def _global_args(text: str) -> str:
    """The ARG lines before the first FROM (they give FROM its values)."""
    head = _FROM.split(text, maxsplit=1)[0]
    return "".join(f"{line}\n" for line in head.splitlines() if line.strip().upper().startswith("ARG "))


def _image_id(client: Any, image: str) -> str:
    try:
        return str(client.images.get(image).id)[:19]
    except Exception:  # gone meanwhile: the id is only for the log
        return "id unknown"


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
