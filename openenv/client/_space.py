"""What `from_hub` asks the Hugging Face Hub about a Space (through `huggingface_hub`).

Every call here but `rouse` blocks (huggingface_hub is synchronous); callers run them in worker
threads. `rouse` and `wait_for_stage` are also how the Hub's play sessions wake a sleeping Space.
The Space's URL comes from what the Hub says (runtime domains, else its subdomain), never from
the repo name: names with underscores, upper case or custom domains map in ways a guess misses.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.client import _settings
from openenv.errors import ProviderUnavailableError

__all__ = [
    "SpaceFacts",
    "download_space",
    "hf_api",
    "payment_required",
    "rouse",
    "space_facts",
    "space_url",
    "wait_for_stage",
    "wake",
]

RUNNING = frozenset({"RUNNING", "RUNNING_BUILDING", "RUNNING_APP_STARTING"})
STARTING = frozenset({"BUILDING", "APP_STARTING"})
ASLEEP = frozenset({"SLEEPING", "STOPPED"})
BROKEN = frozenset({"NO_APP_FILE", "CONFIG_ERROR", "BUILD_ERROR", "RUNTIME_ERROR", "DELETING"})


@dataclass(frozen=True)
class SpaceFacts:
    repo_id: str
    sha: str | None
    head_sha: str | None
    stage: str | None
    url: str | None
    sdk: str | None
    private: bool


def hf_api() -> Any:
    """An `HfApi` for HF_ENDPOINT with the user's token.

    Raises:
        ProviderUnavailableError: huggingface_hub (the `hub` extra) is not installed.
    """
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:
        raise ProviderUnavailableError("from_hub needs huggingface_hub: pip install 'openenv-hub[hub]'") from exc
    return HfApi(endpoint=_settings.hf_endpoint(), token=_settings.hf_token())


def space_url(info: Any) -> str | None:
    """The Space's URL from the Hub's answer: a ready runtime domain, else its subdomain."""
    runtime = getattr(info, "runtime", None)
    domains = (getattr(runtime, "raw", None) or {}).get("domains") or []
    for entry in domains:
        if isinstance(entry, dict) and entry.get("domain") and entry.get("stage", "READY") == "READY":
            return _url_for_host(str(entry["domain"]))
    subdomain = getattr(info, "subdomain", None)
    return f"https://{subdomain}.hf.space" if subdomain else None


def _url_for_host(host: str) -> str:
    name = host.rsplit(":", 1)[0].strip("[]")
    try:
        local = ipaddress.ip_address(name).is_loopback
    except ValueError:
        local = name == "localhost"
    return f"{'http' if local else 'https'}://{host}"


def space_facts(api: Any, repo_id: str, revision: str | None) -> SpaceFacts:
    """The Space's commit at `revision`, its head commit, runtime stage and URL.

    Raises:
        huggingface_hub.errors.RepositoryNotFoundError / RevisionNotFoundError / HfHubHTTPError.
    """
    expand = ["sha", "runtime", "subdomain", "sdk", "private"]
    head = api.space_info(repo_id, expand=expand)
    pinned = api.space_info(repo_id, revision=revision, expand=["sha"]) if revision else head
    runtime = getattr(head, "runtime", None)
    stage = getattr(runtime, "stage", None)
    return SpaceFacts(
        repo_id=repo_id,
        sha=pinned.sha,
        head_sha=head.sha,
        stage=str(stage) if stage else None,
        url=space_url(head),
        sdk=getattr(head, "sdk", None),
        private=bool(getattr(head, "private", False)),
    )


def wake(api: Any, repo_id: str) -> str:
    """Ask the Hub to start a sleeping Space; returns what happened (a refusal is not an error:
    a visit to the Space's URL also wakes it, and only its owner may restart it)."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        api.restart_space(repo_id)
        return "restart requested"
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return f"restart not allowed ({status}); waiting for the visit to wake it"


async def rouse(api: Any, repo_id: str, url: str, headers: dict[str, str] | None = None) -> str:
    """Wake a sleeping Space: one visit to its URL (what wakes a Space on the Hub for anyone), then a
    restart request (which only its owner may make); returns what the Hub said to the request.

    Raises:
        PaymentRequiredError: the visit was answered 402 Payment Required (no wait will change it).
    """
    from openenv.client.providers._health import PAYMENT_REQUIRED, PaymentRequiredError, probe
    from openenv.client.providers.base import in_thread

    try:
        status, _ = await probe(url, timeout_s=_settings.SPACE_VISIT_TIMEOUT_S, headers=headers)
    except (OSError, TimeoutError, ValueError, IndexError):  # asleep: it need not answer yet
        status = None
    if status == PAYMENT_REQUIRED:
        raise PaymentRequiredError(payment_required(url), url=url)
    return str(await in_thread(wake, api, repo_id))


def payment_required(url: str) -> str:
    """What a 402 from a Space's URL means, for people."""
    return (
        f"the Space answers 402 Payment Required at {url} (its namespace must pay for it to run on the Hub; "
        "waiting does not change that)"
    )


def wait_for_stage(
    api: Any, repo_id: str, timeout_s: float, on_stage: Callable[[str, float], None] | None = None
) -> str:
    """Poll the Space's runtime until it runs, breaks, or `timeout_s` passes; returns the last stage.
    `on_stage(stage, seconds waited)` hears each stage the Hub reports, once, as it is first seen."""
    start = time.monotonic()
    deadline = start + timeout_s
    delay = 0.2
    seen: str | None = None
    while True:
        stage = str(api.get_space_runtime(repo_id).stage)
        if on_stage is not None and stage != seen:
            on_stage(stage, time.monotonic() - start)
        seen = stage
        if stage in RUNNING or stage in BROKEN or stage == "PAUSED" or time.monotonic() >= deadline:
            return stage
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 2.0)


def download_space(api: Any, repo_id: str, sha: str) -> Path:
    """The Space's files at commit `sha`, downloaded once into the cache; returns the folder."""
    from huggingface_hub import snapshot_download

    target = _settings.cache_dir() / "spaces" / repo_id.replace("/", "--") / sha
    marker = target / ".openenv-complete"
    if marker.is_file():
        return target
    snapshot_download(
        repo_id, repo_type="space", revision=sha, local_dir=target, endpoint=api.endpoint, token=api.token
    )
    marker.write_text(sha)
    return target
