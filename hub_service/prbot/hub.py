"""The pull-request bot's view of the Hub: a pull request's state and head, and its comments.

`HubPullRequests` is the real client (`huggingface_hub` against HF_ENDPOINT); the bot talks to
this small Protocol so another Hub could stand in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hub_service.errors import SourceError
from hub_service.queue.errors import Transient

__all__ = ["HubPullRequests", "PullRequestInfo", "PullRequests"]


@dataclass(frozen=True)
class PullRequestInfo:
    num: int
    is_pull_request: bool
    status: str  # open | draft | closed | merged
    title: str
    head_sha: str | None  # the commit refs/pr/{num} points at


class PullRequests(Protocol):
    def info(self, repo_id: str, num: int) -> PullRequestInfo | None:
        """The discussion `num`, or None when it does not exist (any more)."""
        ...

    def post(self, repo_id: str, num: int, text: str) -> str:
        """Add a comment; returns its id."""
        ...

    def edit(self, repo_id: str, num: int, comment_id: str, text: str) -> bool:
        """Replace a comment's text; False when the comment is gone."""
        ...

    def find(self, repo_id: str, num: int, marker: str) -> str | None:
        """The id of our own comment that contains `marker`, if there is one."""
        ...


class HubPullRequests:
    """`PullRequests` over `huggingface_hub.HfApi` (Spaces only)."""

    def __init__(self, endpoint: str | None, token: str | None) -> None:
        from huggingface_hub import HfApi

        self.api = HfApi(endpoint=endpoint, token=token)
        self.has_token = token is not None
        self._me: str | None = None

    def info(self, repo_id: str, num: int) -> PullRequestInfo | None:
        details = self._call(
            f"reading {repo_id} discussion #{num}", self.api.get_discussion_details, repo_id, num, repo_type="space"
        )
        if details is None:
            return None
        head = None
        if details.is_pull_request and details.status in ("open", "draft"):
            refs = self._call(
                f"reading the refs of {repo_id}",
                self.api.list_repo_refs,
                repo_id,
                repo_type="space",
                include_pull_requests=True,
            )
            wanted = f"refs/pr/{num}"
            head = (
                next((r.target_commit for r in (refs.pull_requests or []) if r.ref == wanted), None) if refs else None
            )
        return PullRequestInfo(
            num=num, is_pull_request=details.is_pull_request, status=details.status, title=details.title, head_sha=head
        )

    def post(self, repo_id: str, num: int, text: str) -> str:
        self._need_token()
        comment = self._call(
            f"commenting on {repo_id} #{num}", self.api.comment_discussion, repo_id, num, text, repo_type="space"
        )
        if comment is None:
            raise SourceError(f"{repo_id} has no discussion #{num} to comment on")
        return str(comment.id)

    def edit(self, repo_id: str, num: int, comment_id: str, text: str) -> bool:
        self._need_token()
        done = self._call(
            f"editing comment {comment_id} on {repo_id} #{num}",
            self.api.edit_discussion_comment,
            repo_id,
            num,
            comment_id,
            text,
            repo_type="space",
        )
        return done is not None

    def find(self, repo_id: str, num: int, marker: str) -> str | None:
        details = self._call(
            f"reading {repo_id} discussion #{num}", self.api.get_discussion_details, repo_id, num, repo_type="space"
        )
        if details is None:
            return None
        me = self._whoami()
        for event in details.events:
            if event.type == "comment" and event.author == me and marker in (getattr(event, "content", "") or ""):
                return str(event.id)
        return None

    def _whoami(self) -> str | None:
        if self._me is None and self.has_token:
            who = self._call("asking the Hub who the bot is", self.api.whoami)
            self._me = str(who["name"]) if who else None
        return self._me

    def _need_token(self) -> None:
        if not self.has_token:
            raise SourceError(
                "the pull-request bot needs a Hub token to comment: set OPENENV_HUB_HF_TOKEN (a token with write access to discussions)"
            )

    @staticmethod
    def _call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call the Hub: None for 404, Transient for what may pass (5xx, 429, network), SourceError otherwise."""
        import httpx2  # huggingface_hub's own HTTP library (2.x)
        from huggingface_hub.errors import HfHubHTTPError

        try:
            return fn(*args, **kwargs)
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 404:
                return None
            if status is None or status >= 500 or status == 429:
                raise Transient(f"{what}: the Hub answered {status}: {exc}") from exc
            raise SourceError(f"{what}: the Hub refused ({status}): {exc}") from exc
        except (httpx2.TransportError, OSError) as exc:
            raise Transient(f"{what}: {exc}") from exc
