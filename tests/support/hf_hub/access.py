"""Who may do what on the stand-in Hub, and the small helpers every route uses."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import JSONResponse

from tests.support.hf_hub.store import HubError, HubStore, Repo

__all__ = ["KINDS", "Access", "HubState", "User"]

KINDS = {"models": "model", "datasets": "dataset", "spaces": "space"}


@dataclass
class User:
    name: str
    token: str
    orgs: list[str] = field(default_factory=list)
    role: str = "write"  # or "read"

    def can_write(self, owner: str) -> bool:
        return self.role == "write" and (owner == self.name or owner in self.orgs)


@dataclass
class HubState:
    """What the app serves: the store, the users, settings, and the request counter."""

    store: HubStore
    users: dict[str, User] = field(default_factory=dict)  # token -> user
    page_size: int = 100
    auto_run: bool = True  # a Space whose main gets a Dockerfile goes RUNNING (the stand-in builds nothing)
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    endpoint: str = ""
    webhooks: Any = None  # the WebhookSender (webhooks.py), made by create_hub_app
    # repo id -> [(stage, seconds after a restart request)]: what `HfApi.restart_space` does to a Space
    # (HubStandIn.wake_plan); a Space with no plan accepts the request and stays as it is (asleep).
    wake_plans: dict[str, list[tuple[str, float]]] = field(default_factory=dict)


class Access:
    """Authentication, permissions and paging over a `HubState`."""

    def __init__(self, state: HubState) -> None:
        self.state = state
        self.store = state.store

    def endpoint(self, request: Request) -> str:
        return self.state.endpoint or str(request.base_url).rstrip("/")

    def user_of(self, request: Request, *, required: bool = False) -> User | None:
        auth = request.headers.get("authorization", "")
        if not auth:
            if required:
                raise HubError(401, "You must be authenticated to access this resource")
            return None
        token = auth.removeprefix("Bearer ").strip()
        user = self.state.users.get(token)
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    def readable(self, request: Request, kind: str, owner: str, name: str) -> tuple[Repo, User | None]:
        if kind not in KINDS:
            raise HubError(404, f"Unknown repo type {kind}")
        repo = self.store.get(KINDS[kind], f"{owner}/{name}")
        user = self.user_of(request)
        if repo.private and (user is None or not (user.name == repo.owner or repo.owner in user.orgs)):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo, user

    def writable(self, request: Request, kind: str, owner: str, name: str) -> tuple[Repo, User]:
        repo, user = self.readable(request, kind, owner, name)
        if user is None:
            raise HubError(401, "You must be authenticated to write to this repo")
        if not user.can_write(repo.owner):
            raise HubError(403, f"You don't have the rights to write to {repo.id}")
        return repo, user

    def committer(self, request: Request, kind: str, owner: str, name: str, revision: str) -> tuple[Repo, User]:
        # Like the Hub: anyone signed in may open a pull request on a repo they can read, and push
        # to the refs/pr/N of a pull request they opened; everything else needs write access.
        repo, user = self.readable(request, kind, owner, name)
        if user is None:
            raise HubError(401, "You must be authenticated to write to this repo")
        if user.can_write(repo.owner) or user.role != "write":
            return self.writable(request, kind, owner, name)
        if request.query_params.get("create_pr") in ("1", "true"):
            return repo, user
        number = revision.rsplit("/", 1)[-1]
        if (
            revision.startswith("refs/pr/")
            and number.isdigit()
            and self.store.discussion(repo, int(number)).author == user.name
        ):
            return repo, user
        raise HubError(403, f"You don't have the rights to write to {repo.id}")

    @staticmethod
    def split_revision(rest: str) -> tuple[str, str]:
        # Revisions are URL-quoted by the client, but the path arrives decoded: refs/pr/N has slashes.
        parts = rest.split("/")
        if len(parts) >= 3 and parts[0] == "refs" and parts[1] in ("pr", "convert", "heads"):
            rev = "/".join(parts[:3])
            return (rev[len("refs/heads/") :] if parts[1] == "heads" else rev), "/".join(parts[3:])
        return parts[0], "/".join(parts[1:])

    def paged(self, request: Request, items: list[Any], size: int) -> JSONResponse:
        start = int(request.query_params.get("cursor") or 0)
        page = items[start : start + size]
        headers = {}
        if start + size < len(items):
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"] + [
                ("cursor", str(start + size))
            ]
            headers["Link"] = f'<{self.endpoint(request)}{request.url.path}?{urlencode(query)}>; rel="next"'
        return JSONResponse(page, headers=headers)
