"""What the client reads from the process environment (the only place it does).

| variable | default | meaning |
|---|---|---|
| HF_TOKEN / HF_TOKEN_PATH | the `hf auth login` file | token sent to Hugging Face hosts |
| HF_ENDPOINT | `https://huggingface.co` | the Hugging Face Hub that `from_hub` asks |
| OPENENV_CACHE_DIR | `$XDG_CACHE_HOME/openenv` | cached env venvs, downloaded Spaces, SDK wheels |
| OPENENV_STATE_DIR | `<cache>/run` | records and logs of servers this machine's clients started |
| OPENENV_NAME_PREFIX | `openenv` | prefix of container / service names |
| OPENENV_LABELS | (none) | extra `key=value,...` labels put on everything a client starts |
| OPENENV_HUB_URL | (none) | an OpenEnv Hub service asked first by `from_hub` |
| OPENENV_LOCK | (none) | a lock file (`openenv lock`): `from_hub` clients connect only to what it names |
| OPENENV_TRUST_REMOTE_CODE | false | allow `from_hub` to run a Space's code locally |
| OPENENV_SPACE_IMAGE | `registry.hf.space/{owner}-{name}:latest` | a Space's image reference |
| OPENENV_BASE_IMAGE | (the Dockerfile's) | `ARG BASE_IMAGE` when `from_hub` builds an image |
| OPENENV_SPACE_WAKE_TIMEOUT_S | 300 | how long `from_hub` waits for a sleeping or starting Space to run (then: its image) |
| OPENENV_REGISTRY_USER / OPENENV_REGISTRY_PASSWORD | (docker's config.json) | credentials for pulling a Hub's images; for a Space's image (`OPENENV_SPACE_IMAGE`) the default is the HF user and HF_TOKEN |
| OPENENV_HUB_SIGNING_KEY | (the Hub's, kept at first use) | PEM public key a Hub's image signatures are checked with |
| OPENENV_ALLOW_UNSIGNED | false | let `from_hub` run a Hub's image that carries no signature |
| OPENENV_CONTAINER_RUNTIME | (the engine's default) | the OCI runtime `ContainerProvider` runs containers under, e.g. `runsc` (gVisor) |

Named limits (constants): `SPACE_VISIT_TIMEOUT_S`, how long the one request that wakes a sleeping
Space waits for an answer (only a 402 in it matters); `SPACE_REGISTRY_ASK_TIMEOUT_S`, how long a
Space image's registry is given to say whether it refuses anonymous pulls, after a pull failed.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "SPACE_REGISTRY_ASK_TIMEOUT_S",
    "SPACE_VISIT_TIMEOUT_S",
    "SPACE_WAKE_TIMEOUT_VAR",
    "allow_unsigned",
    "base_image",
    "cache_dir",
    "container_runtime",
    "extra_labels",
    "hf_endpoint",
    "hf_token",
    "hub_signing_key",
    "hub_url",
    "is_hf_host",
    "lock_path",
    "name_prefix",
    "registry_auth",
    "space_image_template",
    "space_wake_timeout_s",
    "state_dir",
    "trust_remote_code",
]

_HF_HOST_SUFFIXES = (".hf.space", ".huggingface.co", ".hf.co")

SPACE_WAKE_TIMEOUT_VAR = "OPENENV_SPACE_WAKE_TIMEOUT_S"
SPACE_VISIT_TIMEOUT_S = 5.0
SPACE_REGISTRY_ASK_TIMEOUT_S = 10.0


def hf_token() -> str | None:
    """The user's Hugging Face token: `HF_TOKEN`, else the token file `huggingface-cli login` wrote."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token.strip()
    path = os.environ.get("HF_TOKEN_PATH") or str(
        Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "token"
    )
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def is_hf_host(url: str) -> bool:
    """Whether `url` points at Hugging Face (where the ambient HF token may be sent)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in ("hf.space", "huggingface.co", "hf.co") or host.endswith(_HF_HOST_SUFFIXES)


_TRUE = {"1", "true", "yes", "on"}


def cache_dir() -> Path:
    """Where the client caches env venvs and downloaded Spaces."""
    explicit = os.environ.get("OPENENV_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "openenv"


def state_dir() -> Path:
    """Where records and logs of the servers that clients on this machine started are kept."""
    explicit = os.environ.get("OPENENV_STATE_DIR")
    return Path(explicit).expanduser() if explicit else cache_dir() / "run"


def name_prefix() -> str:
    """Prefix of the names of containers and services the client starts."""
    return os.environ.get("OPENENV_NAME_PREFIX", "").strip() or "openenv"


def extra_labels() -> dict[str, str]:
    """Labels from OPENENV_LABELS (`k=v,k2=v2`) put on everything a client starts.

    Raises:
        ConfigurationError: an item is not `key=value`.
    """
    from openenv.errors import ConfigurationError

    labels: dict[str, str] = {}
    for item in os.environ.get("OPENENV_LABELS", "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"OPENENV_LABELS item {item!r} is not key=value; fix or unset OPENENV_LABELS")
        labels[key.strip()] = value.strip()
    return labels


def hub_url() -> str | None:
    """Base URL of the OpenEnv Hub service that `from_hub` asks first, if one is configured."""
    url = os.environ.get("OPENENV_HUB_URL", "").strip()
    return url.rstrip("/") or None


def lock_path() -> Path | None:
    """The lock file (OPENENV_LOCK) that `from_hub` clients must keep to, if one is set."""
    raw = os.environ.get("OPENENV_LOCK", "").strip()
    return Path(raw).expanduser() if raw else None


def registry_auth() -> dict[str, str] | None:
    """Credentials for pulling images from a Hub's registry (OPENENV_REGISTRY_USER / _PASSWORD), or None:
    the engine then uses docker's own login (`docker login`, config.json)."""
    user = os.environ.get("OPENENV_REGISTRY_USER", "").strip()
    if not user:
        return None
    return {"username": user, "password": os.environ.get("OPENENV_REGISTRY_PASSWORD", "")}


def hub_signing_key() -> Path | None:
    """The PEM public key (OPENENV_HUB_SIGNING_KEY) a Hub's image signatures are checked with, if set."""
    raw = os.environ.get("OPENENV_HUB_SIGNING_KEY", "").strip()
    return Path(raw).expanduser() if raw else None


def allow_unsigned() -> bool:
    """Whether OPENENV_ALLOW_UNSIGNED lets `from_hub` run a Hub's registry image that has no signature."""
    return os.environ.get("OPENENV_ALLOW_UNSIGNED", "").strip().lower() in _TRUE


def container_runtime() -> str | None:
    """The engine's runtime for containers a client starts (OPENENV_CONTAINER_RUNTIME), or None: the engine's default."""
    return os.environ.get("OPENENV_CONTAINER_RUNTIME", "").strip() or None


def trust_remote_code() -> bool:
    """Whether OPENENV_TRUST_REMOTE_CODE allows running Hub code locally."""
    return os.environ.get("OPENENV_TRUST_REMOTE_CODE", "").strip().lower() in _TRUE


def space_image_template() -> str:
    """Image reference of a Space's container; `{owner}`, `{name}`, `{subdomain}`, `{revision}` are filled in."""
    return os.environ.get("OPENENV_SPACE_IMAGE", "").strip() or "registry.hf.space/{owner}-{name}:latest"


def base_image() -> str | None:
    """`ARG BASE_IMAGE` for images that `from_hub` builds (None: the Dockerfile's default)."""
    return os.environ.get("OPENENV_BASE_IMAGE", "").strip() or None


def space_wake_timeout_s() -> float:
    """How long `from_hub` waits for a sleeping or starting Space to run."""
    from openenv.errors import ConfigurationError

    raw = os.environ.get(SPACE_WAKE_TIMEOUT_VAR, "").strip()
    try:
        value = float(raw) if raw else 300.0
    except ValueError:
        raise ConfigurationError(f"{SPACE_WAKE_TIMEOUT_VAR}={raw!r} is not a number of seconds") from None
    if not value >= 0:
        raise ConfigurationError(f"{SPACE_WAKE_TIMEOUT_VAR}={raw!r} must be 0 or more seconds")
    return value


def hf_endpoint() -> str:
    """The Hugging Face Hub's URL (HF_ENDPOINT, read at call time: huggingface_hub reads it once at import)."""
    return (os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co").rstrip("/")
