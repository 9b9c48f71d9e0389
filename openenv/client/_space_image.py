"""Pulling a Space's own image (OPENENV_SPACE_IMAGE: `registry.hf.space/<owner>-<name>:latest` by
default) for `from_hub`'s container step.

The Hub's registry asks many Spaces' pullers to log in, with their Hugging Face user name and a token
as the password. `from_hub` sends the user's token (HF_TOKEN, else the file `hf auth login` wrote)
with the user name the Hub gives for it (whoami); OPENENV_REGISTRY_USER / _PASSWORD, when set, are
sent instead, and with neither the engine's own login (`docker login`) is used. When a pull fails,
the registry itself is asked (anonymously, by its HTTP status, never by the engine's words) whether
it refuses anonymous pulls: then the error says how to log in.
"""

from __future__ import annotations

import logging
from typing import Any

from openenv.client import _settings
from openenv.client.providers._docker import docker_errors
from openenv.errors import ProviderStartError

__all__ = ["pull_space_image", "space_registry_login"]

log = logging.getLogger("openenv.resolve")


def space_registry_login(hf_api: Any) -> tuple[dict[str, str] | None, str]:
    """(the credentials to pull a Space's image with, or None for the engine's own login; who they are).

    Raises:
        ProviderStartError: there is a token, but the Hugging Face Hub does not say whose it is.
    """
    explicit = _settings.registry_auth()
    if explicit is not None:
        return explicit, f"OPENENV_REGISTRY_USER={explicit['username']}"
    token = _settings.hf_token()
    if token is None:
        return None, "no Hugging Face token"
    try:
        name = str(hf_api.whoami(token=token)["name"])
    except Exception as exc:  # huggingface_hub's HTTP errors (an expired or revoked token) and connection ones
        raise ProviderStartError(
            f"the Hugging Face Hub ({_settings.hf_endpoint()}) does not accept HF_TOKEN ({type(exc).__name__}), "
            "so the Space's image cannot be pulled with it: make a new token or run `hf auth login`"
        ) from None
    return {"username": name, "password": token}, f"the Hugging Face token of {name}"


def pull_space_image(docker_api: Any, image: str, hf_api: Any) -> None:
    """Pull `image` unless the engine has it already, with the login `space_registry_login` gives.

    Raises:
        ProviderStartError: it could not be pulled; when the registry refuses anonymous pulls, the
            message says how to log in.
    """
    from openenv.client.providers.container import _image_exists

    if _image_exists(docker_api, image):
        return
    auth, who = space_registry_login(hf_api)
    log.info("pulling the Space's image %s (login: %s)", image, who)
    repository, reference = _split(image)
    try:
        docker_api.pull(repository, tag=reference, auth_config=auth)
    except docker_errors().DockerException as exc:
        raise ProviderStartError(_why_not(image, auth, who, exc)) from None


def _split(image: str) -> tuple[str, str]:
    if "@" in image:
        repository, digest = image.split("@", 1)
        return repository, digest
    name = image.rsplit("/", 1)[-1]
    if ":" in name:
        repository, tag = image.rsplit(":", 1)
        return repository, tag
    return image, "latest"


def _why_not(image: str, auth: dict[str, str] | None, who: str, exc: BaseException) -> str:
    from openenv.images._registry import ask_registry, image_parts

    host = image_parts(image)[0]
    answer = ask_registry(image, timeout_s=_settings.SPACE_REGISTRY_ASK_TIMEOUT_S)
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if answer.kind != "refused":
        return f"image {image} could not be pulled ({said}; {answer.detail})"
    if auth is None:
        return (
            f"image {image} needs a login to {host} ({answer.detail}): set HF_TOKEN to a Hugging Face token that "
            "can read the Space (https://huggingface.co/settings/tokens) or run `hf auth login`, and try again; or "
            f"log the engine in: `docker login {host} -u <your Hugging Face user name>` with the token as the password"
        )
    return (
        f"{host} refused {image} to {who} ({said}): check that the token can read the Space (a private Space "
        "needs its owner's or a member's token), or set OPENENV_REGISTRY_USER / OPENENV_REGISTRY_PASSWORD"
    )
