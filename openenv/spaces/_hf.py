"""The one place that touches `huggingface_hub`, for both of its majors (1.x and 2.x).

What differs between them and how it is handled:
- duplicating a Space: 2.x removed `duplicate_space`; `duplicate_repo(repo_type="space")`
  (2.x, late 1.x) is used when present, else `duplicate_space` (early 1.x), with the Space
  options renamed to match.
- uploads: 2.x streams `upload_folder` through a pipeline that opens pull requests itself;
  1.x commits with `create_pr=1`. Both go through `upload_folder`, which hides it.
Endpoint and token come from `HF_ENDPOINT` / `HF_TOKEN` (read by huggingface_hub) unless given.
"""

from __future__ import annotations

from typing import Any

from openenv.errors import OpenEnvError

__all__ = ["HubRequestError", "SpaceUrls", "duplicate_space", "hf_api", "hub_error", "space_urls", "whoami"]


class HubRequestError(OpenEnvError):
    """A Hugging Face Hub request failed; the message says why and what to do."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def hf_api(endpoint: str | None = None, token: str | None = None) -> Any:
    """An `HfApi` client.

    Raises:
        HubRequestError: huggingface_hub is not installed.
    """
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:
        raise HubRequestError("publishing needs huggingface_hub: pip install 'openenv-hub[hub]'") from exc
    return HfApi(endpoint=endpoint, token=token)


def hub_error(exc: BaseException, action: str, repo_id: str | None = None) -> HubRequestError:
    """A `HubRequestError` with advice, for an exception raised by huggingface_hub while doing `action`."""
    from huggingface_hub import errors

    if isinstance(exc, errors.LocalTokenNotFoundError):
        return HubRequestError(
            f"{action}: not logged in to the Hugging Face Hub; set HF_TOKEN or run `hf auth login`", 401
        )
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    server = ""
    if response is not None:
        try:
            server = str(response.json().get("error") or "")
        except ValueError:
            server = ""
    detail = f" ({server})" if server else ""
    target = repo_id or "the repo"
    advice = {
        401: "your token was refused: set a valid HF_TOKEN (a write token) or run `hf auth login`",
        403: f"your token cannot write to {target}: use a write token, or a namespace you own (--repo-id)",
        404: f"{target} was not found: check the id (owner/name) and that your token can see it",
        409: f"{target} already exists: pick another --repo-id",
        412: "the Space changed while uploading: run the command again",
    }.get(status or 0)
    if isinstance(exc, errors.RepositoryNotFoundError):
        advice = advice or f"{target} was not found: check the id (owner/name) and that your token can see it"
    if advice is None:
        advice = f"the Hub answered {status}" if status else f"{type(exc).__name__}: {exc}"
        if "Connect" in type(exc).__name__ or (isinstance(exc, OSError) and status is None):
            advice = f"cannot reach the Hub ({exc}); check the network and HF_ENDPOINT"
    return HubRequestError(f"{action}: {advice}{detail}", status)


def whoami(api: Any) -> str:
    """The user name the token belongs to.

    Raises:
        HubRequestError: no token, or the Hub refused it.
    """
    try:
        return str(api.whoami()["name"])
    except Exception as exc:  # huggingface_hub's own errors, mapped to advice
        raise hub_error(exc, "checking who you are") from exc


def duplicate_space(
    api: Any,
    from_id: str,
    to_id: str,
    *,
    private: bool | None = None,
    hardware: str | None = None,
    variables: list[dict[str, str]] | None = None,
    secrets: list[dict[str, str]] | None = None,
) -> str:
    """Duplicate a Space with whichever API this huggingface_hub has; returns the new Space's web URL.

    Raises:
        HubRequestError: the source is missing, the target exists, or the token cannot write.
    """
    try:
        if hasattr(api, "duplicate_repo"):
            url = api.duplicate_repo(
                from_id,
                to_id,
                repo_type="space",
                private=private,
                space_hardware=hardware,
                space_variables=variables,
                space_secrets=secrets,
            )
        else:
            url = api.duplicate_space(
                from_id, to_id, private=private, hardware=hardware, variables=variables, secrets=secrets
            )
    except Exception as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise hub_error(exc, f"duplicating {from_id}", to_id if status in (403, 409) else from_id) from exc
    return str(url)


class SpaceUrls:
    """Where a Space lives: its page on the Hub and the URL its app answers on."""

    def __init__(self, page: str, app: str, stage: str | None) -> None:
        self.page = page
        self.app = app
        self.stage = stage


def space_urls(api: Any, repo_id: str) -> SpaceUrls:
    """The Space's page and app URLs, from the Hub's answer (runtime domains, then subdomain).

    The app host is what the Hub says (`domains`, `subdomain`), never guessed when it says it.
    """
    endpoint = str(api.endpoint).rstrip("/")
    page = f"{endpoint}/spaces/{repo_id}"
    app, stage = "", None
    try:
        info = api.space_info(repo_id)
    except Exception as exc:
        raise hub_error(exc, f"reading {repo_id}", repo_id) from exc
    runtime = getattr(info, "runtime", None)
    raw = getattr(runtime, "raw", None) or {}
    stage = getattr(runtime, "stage", None)
    domains: list[str] = [d["domain"] for d in raw.get("domains") or [] if isinstance(d, dict) and d.get("domain")]
    if domains:
        app = domains[0] if "://" in domains[0] else f"https://{domains[0]}"
    elif getattr(info, "host", None):
        app = str(info.host)
    elif getattr(info, "subdomain", None):
        app = f"https://{info.subdomain}.hf.space"
    else:
        app = f"https://{repo_id.lower().replace('/', '-').replace('_', '-')}.hf.space"
    return SpaceUrls(page, app, stage)
